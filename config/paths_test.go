package config

import "testing"

func TestDefaultPaths(t *testing.T) {
	for _, tc := range []struct {
		name          string
		euid          int
		vars          map[string]string
		state, socket string
	}{
		{"root ignores XDG", 0, map[string]string{"HOME": "/root", "XDG_STATE_HOME": "/x", "XDG_RUNTIME_DIR": "/run/user/0"},
			"/var/lib/continuityd", "/run/continuityd/continuityd.sock"},
		{"root bare", 0, map[string]string{},
			"/var/lib/continuityd", "/run/continuityd/continuityd.sock"},
		{"user with both XDG vars", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/xdg/state", "XDG_RUNTIME_DIR": "/run/user/1000"},
			"/xdg/state/continuityd", "/run/user/1000/continuityd/continuityd.sock"},
		{"user without XDG vars", 1000, map[string]string{"HOME": "/home/u"},
			"/home/u/.local/state/continuityd", "/home/u/.local/state/continuityd/continuityd.sock"},
		{"user with runtime dir only", 1000, map[string]string{"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"},
			"/home/u/.local/state/continuityd", "/run/user/1000/continuityd/continuityd.sock"},
		{"user with state home only", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/xdg/state"},
			"/xdg/state/continuityd", "/xdg/state/continuityd/continuityd.sock"},
		{"relative XDG values are ignored", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "state", "XDG_RUNTIME_DIR": "run"},
			"/home/u/.local/state/continuityd", "/home/u/.local/state/continuityd/continuityd.sock"},
		{"empty XDG values are ignored", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "", "XDG_RUNTIME_DIR": ""},
			"/home/u/.local/state/continuityd", "/home/u/.local/state/continuityd/continuityd.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := envWith(tc.euid, tc.vars)
			state, socket := defaultPaths(env.lookup, tc.euid, env.home())
			if state != tc.state || socket != tc.socket {
				t.Errorf("defaultPaths = %q, %q; want %q, %q", state, socket, tc.state, tc.socket)
			}
			// Decode applies them.
			c, err := decode(nil, "f.toml", env)
			if err != nil {
				t.Fatal(err)
			}
			if c.Daemon.StateDir != tc.state || c.Daemon.Socket != tc.socket {
				t.Errorf("Decode used %q, %q", c.Daemon.StateDir, c.Daemon.Socket)
			}
		})
	}
}

// Without a runtime directory the socket follows the state_dir the file sets.
func TestDefaultSocketFollowsStateDir(t *testing.T) {
	env := envWith(1000, map[string]string{"HOME": "/home/u"})
	c, err := decode([]byte(src(`[daemon]`, `state_dir = "/srv/cd"`)), "f.toml", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Daemon.Socket != "/srv/cd/continuityd.sock" {
		t.Errorf("socket = %q", c.Daemon.Socket)
	}
}

func TestNoHome(t *testing.T) {
	env := envWith(1000, map[string]string{})
	_, err := decode(nil, "f.toml", env)
	es, ok := err.(Errors)
	if !ok || len(es) != 1 || es[0].Key != "daemon.state_dir" || es[0].Line != 0 {
		t.Fatalf("got %v", err)
	}
	_, err = decode([]byte(src(`[daemon]`, `state_dir = "/s"`, `[[agent]]`, `name = "a"`, `workdir = "~/w"`)), "f.toml", env)
	if es, ok := err.(Errors); !ok || len(es) != 1 || es[0].Key != "agent[0].workdir" || es[0].Line != 5 {
		t.Fatalf("got %v", err)
	}
}

func TestHomeExpansion(t *testing.T) {
	c := mustDecode(t, src(`[daemon]`, `state_dir = "~"`, `socket = "~/run/../cd.sock"`))
	if c.Daemon.StateDir != "/home/u" || c.Daemon.Socket != "/home/u/cd.sock" {
		t.Errorf("got %q %q", c.Daemon.StateDir, c.Daemon.Socket)
	}
}

// TestPathsNote: as root, the start says which paths it chose and that
// the XDG variables of the environment are ignored; for anyone else, and
// for paths a config chose, nothing.
func TestPathsNote(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	xdg := env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"})
	cases := []struct {
		name          string
		lookup        func(string) (string, bool)
		euid          int
		state, socket string
		want          string
	}{
		{"root, XDG set", xdg, 0, fhsStateDir, fhsSocket,
			"running as root: state in /var/lib/continuityd, socket /run/continuityd/continuityd.sock, the system's places for a service; $XDG_RUNTIME_DIR (/run/user/1000) ignored for root"},
		{"root, no XDG", env(nil), 0, fhsStateDir, fhsSocket,
			"running as root: state in /var/lib/continuityd, socket /run/continuityd/continuityd.sock, the system's places for a service"},
		{"root, paths from a config", xdg, 0, "/srv/cd", "/srv/cd/cd.sock", ""},
		{"a user", xdg, 1000, "/home/u/.local/state/continuityd", "/run/user/1000/continuityd/continuityd.sock", ""},
	}
	for _, c := range cases {
		if got := pathsNote(c.lookup, c.euid, c.state, c.socket); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
