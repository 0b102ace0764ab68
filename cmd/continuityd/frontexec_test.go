package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFront copies the continuityd front alone into a new directory, with
// no continuityd-daemon beside it, and returns its path.
func copyFront(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "continuityd")
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return alone
}

// `continuityd run` becomes continuityd-daemon in the same process: the
// PID its starter holds (and signals, and a service manager watches) is
// the daemon's.
func TestRunKeepsItsPID(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	st := get(t, c, "/v1/status")
	if pid, _ := st["pid"].(float64); int(pid) != p.cmd.Process.Pid {
		t.Fatalf("the daemon answers with pid %v; `continuityd run` was started as %d", st["pid"], p.cmd.Process.Pid)
	}
}

// `continuityd help` lists every command, the daemon-side ones too.
func TestHelpListsEveryCommand(t *testing.T) {
	code, out, _ := cli(t, nil, "", "help")
	if code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	for _, name := range []string{"run", "resume", "checkpoint", "capsule", "signal", "hook", "statusline", "mcp", "status",
		"deadletter", "fleet", "snapshot", "recover", "delx", "config", "service", "version"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
}

// A front with no continuityd-daemon beside it finds one on $PATH; with
// none there either, a daemon-side command fails with an error that names
// both places and how to build it, while the client commands still work.
func TestFrontFindsTheDaemonBinary(t *testing.T) {
	alone := copyFront(t)
	// On $PATH (the directory the tests built both into): the daemon's own
	// refusal of the flag comes back, exit status and all.
	env := []string{"PATH=" + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")}
	code, _, stderr := runBinary(t, alone, env, "", "run", "--no-such-flag")
	if code != exitUsage || !strings.Contains(stderr, "continuityd run: unknown flag --no-such-flag") {
		t.Fatalf("run --no-such-flag, continuityd-daemon on $PATH: exit %d, want %d with run's refusal of the flag:\n%s", code, exitUsage, stderr)
	}
	// Nowhere.
	env = []string{"PATH=" + t.TempDir()}
	for _, args := range [][]string{{"run"}, {"service", "status"}, {"mcp"}, {"delx", "register"}} {
		code, _, stderr := runBinary(t, alone, env, "", args...)
		beside := filepath.Join(filepath.Dir(alone), "continuityd-daemon")
		if code != exitFailed || !strings.Contains(stderr, beside) || !strings.Contains(stderr, "$PATH") || !strings.Contains(stderr, "go install ./cmd/...") {
			t.Errorf("%q with no continuityd-daemon: exit %d, want %d with %s, $PATH and `go install ./cmd/...` named:\n%s", args, code, exitFailed, beside, stderr)
		}
	}
	if code, out, stderr := runBinary(t, alone, append(env, "CONTINUITYD_STATE_DIR="+t.TempDir()), "", "hook", "--socket", filepath.Join(t.TempDir(), "none.sock")); code != exitOK {
		t.Errorf("hook with no continuityd-daemon: exit %d\n%s%s", code, out, stderr)
	}
}

// A symlink to the front, elsewhere, still finds the continuityd-daemon
// beside the binary it links to. (Linux's os.Executable already resolves
// the link; internal/front/cli's TestFindDaemon checks the resolving itself.)
func TestFrontBehindASymlink(t *testing.T) {
	link := filepath.Join(t.TempDir(), "continuityd")
	if err := os.Symlink(binary, link); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBinary(t, link, []string{"PATH=" + t.TempDir()}, "", "run", "--no-such-flag")
	if code != exitUsage || !strings.Contains(stderr, "continuityd run: unknown flag --no-such-flag") {
		t.Fatalf("run --no-such-flag through a symlink: exit %d, want %d with run's refusal of the flag:\n%s", code, exitUsage, stderr)
	}
}
