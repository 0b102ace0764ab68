package holdgit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A held run waits until Release, at each point; an unarmed run, and a
// second run after the armed one, pass straight through to git.
func TestHoldsOneRunUntilReleased(t *testing.T) {
	g := New(t)
	repo := t.TempDir()
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(g.Path, append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		return cmd
	}
	if out, err := run("init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("init through the wrapper: %v\n%s", err, out)
	}
	for _, f := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(repo, f), []byte(f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		point string
		args  []string
	}{
		{MidAdd, []string{"add", "-A"}},
		{BeforeWriteTree, []string{"write-tree"}},
	} {
		g.Arm(t, tc.point)
		cmd := run(tc.args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		g.WaitHeld(t, 30*time.Second, func() string { return out.String() })
		if tc.point == MidAdd {
			if _, err := os.Stat(filepath.Join(repo, ".git", "index.lock")); err != nil {
				t.Fatalf("held mid-add without the index lock: %v", err)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%s: the held run ended before Release: %v\n%s", tc.point, err, out.String())
		default:
		}
		// A second run of the same subcommand is not held.
		if b, err := run(tc.args...).CombinedOutput(); tc.point != MidAdd && err != nil {
			t.Fatalf("%s: an unheld run: %v\n%s", tc.point, err, b)
		}
		g.Release(t)
		if err := <-done; err != nil {
			t.Fatalf("%s: the released run: %v\n%s", tc.point, err, out.String())
		}
	}
	// git add held in its hook added the files all the same.
	if b, err := run("cat-file", "blob", ":b").Output(); err != nil || string(b) != "b\n" {
		t.Fatalf("b in the index = %q, %v", b, err)
	}
}
