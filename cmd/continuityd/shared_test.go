//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Three users, as on a machine where a system service is shared by a
// group: the daemon's, a member of the daemon's group, and an outsider.
// The ids need no passwd entries.
const (
	daemonID   = 40001
	memberID   = 40002
	outsiderID = 40003
)

var (
	asDaemon   = &syscall.Credential{Uid: daemonID, Gid: daemonID}
	asMember   = &syscall.Credential{Uid: memberID, Gid: memberID, Groups: []uint32{daemonID}}
	asOutsider = &syscall.Credential{Uid: outsiderID, Gid: outsiderID}
)

// runAs runs the CLI as another user.
func runAs(t *testing.T, cred *syscall.Credential, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// usersTop is a temporary directory for a test that runs the daemon and
// its clients as other users (it needs root; the test is skipped
// otherwise): it and the binary's directory are searchable by them, and
// each of dirs is made under it and owned by the daemon's user.
func usersTop(t *testing.T, prefix string, dirs ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	top, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	for _, d := range []string{top, filepath.Dir(binary)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		d = filepath.Join(top, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, daemonID, daemonID); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// TestGroupSharedDaemonAcrossUsers runs the daemon as one user and the
// hooks of two others, for real (it needs root to switch users): with
// socket_mode 0660 a member of the daemon's group reaches the socket, and
// while the daemon is down spools events it stores at its next start and
// answers SessionStart from the last resume; an outsider gets neither.
// Back to 0600, the spool and the agent's directory close again.
func TestGroupSharedDaemonAcrossUsers(t *testing.T) {
	top := usersTop(t, "cdshared", "daemon", "daemon/work")
	home := filepath.Join(top, "daemon") // the daemon's own, as /var/lib is a system service's
	work := filepath.Join(home, "work")
	state, socket := filepath.Join(home, "state"), filepath.Join(home, "run", "d.sock")
	config := filepath.Join(top, "continuityd.toml")
	writeConfig := func(mode string) {
		// The agent admits the daemon's group: its members' hooks use it.
		cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nsocket_mode = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\ngroups = [\"%d\"]\n", state, socket, mode, work, daemonID)
		if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *proc {
		return startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", config)
	}
	env := []string{"CONTINUITYD_SOCKET=" + socket, "CONTINUITYD_STATE_DIR=" + state}
	preCompact := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"` + work + `","hook_event_name":"PreCompact","trigger":"auto"}`
	sessionStart := `{"session_id":"s2","transcript_path":"/tmp/t.jsonl","cwd":"` + work + `","hook_event_name":"SessionStart","source":"resume"}`
	compactions := func(p *proc) float64 {
		c := p.client()
		defer c.CloseIdleConnections()
		return get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)["compactions"].(float64)
	}
	spooled := func() []string {
		names, _ := filepath.Glob(filepath.Join(state, "spool", "*.json"))
		return names
	}
	mode := func(path string) fs.FileMode {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
	}

	writeConfig("0660")
	p := start()
	c := p.client()
	if code, _, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "the focus a member's hook recalls"}); err != nil || code != 200 {
		t.Fatalf("checkpoint: %d %v", code, err)
	}
	c.CloseIdleConnections()
	// Daemon up: the member's hook reaches the socket (mode 0660, in a
	// directory it may search).
	if code, out, errOut := runAs(t, asMember, env, preCompact, "hook"); code != 0 || out != "" || errOut != "" {
		t.Fatalf("member's hook, daemon up: %d %q %q", code, out, errOut)
	}
	if n := compactions(p); n != 1 || len(spooled()) != 0 {
		t.Fatalf("member's hook, daemon up: %v compactions, spool %v", n, spooled())
	}
	p.terminate(t)
	for path, want := range map[string]fs.FileMode{
		state:                          0o710,
		filepath.Join(state, "agents"): 0o750,
		filepath.Join(state, "agents", "builder"):                     0o710,
		filepath.Join(state, "spool"):                                 fs.ModeSetgid | fs.ModeSticky | 0o770,
		filepath.Join(state, "agents", "builder", "last-resume.json"): 0o640,
		filepath.Dir(socket):                                          0o750,
	} {
		if got := mode(path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}

	// Daemon down: the member spools, in a file the daemon's group reads,
	// and is answered from the last resume.
	if code, out, errOut := runAs(t, asMember, env, preCompact, "hook"); code != 0 || out != "" || errOut != "" {
		t.Fatalf("member's hook, daemon down: %d %q %q", code, out, errOut)
	}
	files := spooled()
	if len(files) != 1 {
		t.Fatalf("member's event not spooled: %v", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != memberID || st.Gid != daemonID || fi.Mode().Perm() != 0o640 {
		t.Errorf("spooled file: owner %d group %d mode %v, want %d %d 0640", st.Uid, st.Gid, fi.Mode().Perm(), memberID, daemonID)
	}
	if code, out, _ := runAs(t, asMember, env, sessionStart, "hook"); code != 0 || !strings.Contains(out, "the focus a member's hook recalls") {
		t.Fatalf("member's SessionStart, daemon down: %d %q", code, out)
	}
	// The outsider can do neither, and its hook still exits 0.
	before := len(spooled()) // the member's SessionStart was spooled too
	code, out, errOut := runAs(t, asOutsider, env, preCompact, "hook")
	if code != 0 || out != "" || !strings.Contains(errOut, "could not be spooled") || len(spooled()) != before {
		t.Fatalf("outsider's hook: %d %q %q, spool %v", code, out, errOut, spooled())
	}
	if code, out, _ := runAs(t, asOutsider, env, sessionStart, "hook"); code != 0 || out != "" {
		t.Fatalf("outsider's SessionStart: %d %q", code, out)
	}

	// The daemon, another user, stores the member's event and removes it.
	// (once it answers: the spool is stored off the start-up path).
	p = start()
	waitUntil(t, func() string {
		return fmt.Sprintf("after restart: %v compactions (want 2), spool %v", compactions(p), spooled())
	}, func() bool { return compactions(p) == 2 && len(spooled()) == 0 })
	p.terminate(t)

	// No longer shared: the spool and the agent's directory close again.
	writeConfig("0600")
	p = start()
	p.terminate(t)
	for path, want := range map[string]fs.FileMode{
		filepath.Join(state, "spool"):                                 0o700,
		filepath.Join(state, "agents", "builder"):                     0o700,
		filepath.Join(state, "agents", "builder", "last-resume.json"): 0o600,
	} {
		if got := mode(path); got != want {
			t.Errorf("unshared, %s: mode %v, want %v", path, got, want)
		}
	}
	if code, _, errOut := runAs(t, asMember, env, preCompact, "hook"); code != 0 || !strings.Contains(errOut, "could not be spooled") {
		t.Fatalf("member's hook, unshared daemon down: %d %q", code, errOut)
	}
}

// quickSnapshots are the [watch] and [policy] tables of a test that waits
// for snapshots: a change is snapshotted about half a second after it.
const quickSnapshots = "[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n\n"

// daemonConfig is a root test's daemon: its state directory and socket
// under a directory of the test's, its config at top/continuityd.toml,
// head its [daemon] table (the socket 0660 when shared with the daemon's
// group, and the lines more given).
type daemonConfig struct {
	state, socket, path, head string
}

func newDaemonConfig(top, dir string, shared bool, more string) daemonConfig {
	c := daemonConfig{state: filepath.Join(dir, "state"), socket: filepath.Join(dir, "run", "d.sock"), path: filepath.Join(top, "continuityd.toml")}
	mode := ""
	if shared {
		mode = "socket_mode = \"0660\"\n"
	}
	c.head = fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\n%sshutdown_timeout = \"5s\"\n%s\n", c.state, c.socket, mode, more)
	return c
}

// write writes the config: the [daemon] table, then rest.
func (c daemonConfig) write(t *testing.T, rest string) {
	t.Helper()
	if err := os.WriteFile(c.path, []byte(c.head+rest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeDaemonConfig writes the config of a daemon under dir (see
// daemonConfig) and returns its state directory, socket and config path.
func writeDaemonConfig(t *testing.T, top, dir string, shared bool, more, rest string) (state, socket, path string) {
	t.Helper()
	c := newDaemonConfig(top, dir, shared, more)
	c.write(t, rest)
	return c.state, c.socket, c.path
}
