package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// gitIn runs real git in dir, isolated from the user's and the system's
// configuration (HOME is a temp dir, no global or system config).
func gitIn(t *testing.T, home, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

func receipts(td *testDaemon) []string {
	return toStrings(td.resume("?peek=1")["receipts"])
}

// TestGitInitAfterStartIsFollowed: a repository created in the workdir after
// the daemon started (git init and a first commit at once, before any check
// could see the repository empty) is followed: its commits become receipts.
func TestGitInitAfterStartIsFollowed(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cfg, wd := captureConfig(t)
	home := t.TempDir()
	td := startDaemon(t, cfg)
	gitIn(t, home, wd, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(wd, "a.txt"), []byte("a"), 0o644)
	gitIn(t, home, wd, "add", "a.txt")
	gitIn(t, home, wd, "commit", "-q", "-m", "the first commit")
	waitFor(t, 60*time.Second, func() bool {
		return slices.ContainsFunc(receipts(td), func(r string) bool { return strings.Contains(r, "the first commit") })
	})
	os.WriteFile(filepath.Join(wd, "b.txt"), []byte("b"), 0o644)
	gitIn(t, home, wd, "add", "b.txt")
	gitIn(t, home, wd, "commit", "-q", "-m", "the second commit")
	waitFor(t, 60*time.Second, func() bool {
		return slices.ContainsFunc(receipts(td), func(r string) bool { return strings.Contains(r, "the second commit") })
	})
	for _, r := range receipts(td) {
		if !strings.HasPrefix(r, "work@") {
			t.Fatalf("receipt %q: want the repository's name first", r)
		}
	}
}

// TestGitCloneAfterStartIsFollowed: a repository cloned into the workdir
// after start is followed from the cloned commit: its history is not taken
// for the agent's work, a commit made in the clone is a receipt.
func TestGitCloneAfterStartIsFollowed(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cfg, wd := captureConfig(t)
	home := t.TempDir()
	src := t.TempDir()
	gitIn(t, home, src, "init", "-q", "-b", "main")
	for _, m := range []string{"old history one", "old history two"} {
		os.WriteFile(filepath.Join(src, "f.txt"), []byte(m), 0o644)
		gitIn(t, home, src, "add", "f.txt")
		gitIn(t, home, src, "commit", "-q", "-m", m)
	}
	td := startDaemon(t, cfg)
	gitIn(t, home, wd, "clone", "-q", src, "cloned")
	clone := filepath.Join(wd, "cloned")
	os.WriteFile(filepath.Join(clone, "g.txt"), []byte("g"), 0o644)
	gitIn(t, home, clone, "add", "g.txt")
	gitIn(t, home, clone, "commit", "-q", "-m", "work in the clone")
	waitFor(t, 60*time.Second, func() bool {
		return slices.ContainsFunc(receipts(td), func(r string) bool { return strings.Contains(r, "work in the clone") })
	})
	for _, r := range receipts(td) {
		if strings.Contains(r, "old history") || !strings.HasPrefix(r, "cloned@") {
			t.Fatalf("receipts %q: want only the clone's new commit", receipts(td))
		}
	}
}
