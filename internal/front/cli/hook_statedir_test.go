//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/continuityd/continuityd/config"
)

// A hook finds the state directory of the daemon it addresses: the one
// --config names, $CONTINUITYD_STATE_DIR, the system service's when the
// socket is the system one (a group member sets only the socket), or its
// own default.
func TestHookStateDirFollowsTheSocket(t *testing.T) {
	sysState, sysSock := config.SystemPaths()
	// A user's own default, whoever runs the test (as root the default is
	// the system one, and the cases below could not tell the rule apart).
	const userState, userSock = "/home/u/.local/state/continuityd", "/run/user/1000/continuityd/continuityd.sock"
	cfgPath := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(cfgPath, []byte("[daemon]\nstate_dir = \"/srv/cd/state\"\nsocket = \"/srv/cd/d.sock\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		vars map[string]string
		cf   ClientFlags
		want string
	}{
		{"--config", map[string]string{"CONTINUITYD_SOCKET": sysSock}, ClientFlags{Config: cfgPath}, "/srv/cd/state"},
		{"$CONTINUITYD_STATE_DIR", map[string]string{"CONTINUITYD_STATE_DIR": "/x/state", "CONTINUITYD_SOCKET": sysSock}, ClientFlags{}, "/x/state"},
		{"system socket in the environment", map[string]string{"CONTINUITYD_SOCKET": sysSock}, ClientFlags{}, sysState},
		{"--socket, the system one", nil, ClientFlags{Socket: sysSock}, sysState},
		{"another socket", map[string]string{"CONTINUITYD_SOCKET": "/tmp/other.sock"}, ClientFlags{}, userState},
		{"the user's own socket", map[string]string{"CONTINUITYD_SOCKET": userSock}, ClientFlags{}, userState},
		{"nothing set", nil, ClientFlags{}, userState},
	} {
		e := &Env{Getenv: func(k string) string { return c.vars[k] },
			DefaultPaths: func() (string, string) { return userState, userSock }}
		if got := stateDir(e, c.cf); got != c.want {
			t.Errorf("%s: state dir %q, want %q", c.name, got, c.want)
		}
	}
}
