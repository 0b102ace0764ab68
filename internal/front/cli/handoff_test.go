package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// findDaemon looks beside the executable first (through a symlink to it,
// beside the file it names), then on $PATH, and names both places and the
// way to build it when neither has it.
func TestFindDaemon(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the names carry .exe there")
	}
	installed, elsewhere := t.TempDir(), t.TempDir()
	front, daemon := filepath.Join(installed, "continuityd"), filepath.Join(installed, DaemonBinary)
	for _, p := range []string{front, daemon} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(elsewhere, "continuityd")
	if err := os.Symlink(front, link); err != nil {
		t.Fatal(err)
	}
	self := func(p string) func() (string, error) { return func() (string, error) { return p, nil } }
	onPath := func(string) (string, error) { return "/opt/bin/" + DaemonBinary, nil }
	notOnPath := func(string) (string, error) { return "", exec.ErrNotFound }

	for _, c := range []struct {
		name     string
		self     func() (string, error)
		lookPath func(string) (string, error)
		want     string
	}{
		{"beside", self(front), notOnPath, daemon},
		{"beside, before $PATH", self(front), onPath, daemon},
		{"beside the symlink's target", self(link), notOnPath, daemon},
		{"on $PATH", self(filepath.Join(elsewhere, "x")), onPath, "/opt/bin/" + DaemonBinary},
		{"on $PATH, the executable unknown", func() (string, error) { return "", errors.New("no /proc") }, onPath, "/opt/bin/" + DaemonBinary},
	} {
		if got, err := findDaemon(c.self, c.lookPath); err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}

	_, err := findDaemon(self(filepath.Join(elsewhere, "x")), notOnPath)
	if err == nil {
		t.Fatal("found a continuityd-daemon where there is none")
	}
	for _, want := range []string{filepath.Join(elsewhere, DaemonBinary), "$PATH", "go install ./cmd/..."} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
	// A directory of that name is no binary.
	if err := os.Mkdir(filepath.Join(elsewhere, DaemonBinary), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findDaemon(self(filepath.Join(elsewhere, "x")), notOnPath); err == nil {
		t.Errorf("took the directory %s for the daemon binary", got)
	}
}
