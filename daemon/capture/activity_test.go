package capture

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// TestActivityIsSinceLastVisit: what changes in the workdir, seen by the
// real watcher, becomes since_last_visit's paths, secret-redacted; the
// daemon's own directory inside the workdir never counts as the agent's
// work; a visit the agent received clears what it was shown.
func TestActivityIsSinceLastVisit(t *testing.T) {
	o := testOptions(t)
	own := filepath.Join(o.Workdir, ".continuityd-state")
	writeFile(t, filepath.Join(own, "agents", "builder", "residency.db"), "the daemon's own")
	o.Watch.Own = []string{own, filepath.Join(t.TempDir(), "socket-dir")}
	r := startCapture(t, o)

	// The daemon writes in its own directory first: were it not ignored,
	// it would be seen no later than what follows.
	writeFile(t, filepath.Join(own, "agents", "builder", "last-resume.json"), "{}")
	// Each file arrives whole (one rename): a create and a write apart by
	// more than the quiet period (a loaded machine) would be two bursts,
	// the second landing after the visit below.
	placeFile(t, filepath.Join(o.Workdir, "src", "main.go"), "package main\n")
	placeFile(t, filepath.Join(o.Workdir, "notes-"+secretToken+".txt"), "x")
	got := waitResume(t, r.store, "the changes in since_last_visit", func(res capsule.Resume) bool {
		return slices.Contains(res.SinceLastVisit.Paths, "src/main.go") &&
			slices.ContainsFunc(res.SinceLastVisit.Paths, func(p string) bool { return strings.HasPrefix(p, "notes-") })
	})
	for _, p := range got.SinceLastVisit.Paths {
		if strings.Contains(p, ".continuityd-state") {
			t.Errorf("the daemon's own file counted as the agent's work: %q", p)
		}
		if strings.Contains(p, "ghp_") {
			t.Errorf("a path kept its secret: %q", p)
		}
	}
	if got.SinceLastVisit.PathCount < 2 {
		t.Errorf("path_count %d, want at least the 2 changes", got.SinceLastVisit.PathCount)
	}

	// The agent received that visit: what it was shown goes, what comes
	// after is news.
	_, visit := r.store.Visit()
	r.store.Visited(visit)
	placeFile(t, filepath.Join(o.Workdir, "src", "later.go"), "package main\n")
	waitResume(t, r.store, "only the later change in since_last_visit", func(res capsule.Resume) bool {
		return slices.Equal(res.SinceLastVisit.Paths, []string{"src/later.go"})
	})
}

// placeFile puts a file in place whole: written beside the workdir, then
// renamed into it, so the watcher sees one event for it.
func placeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), filepath.Base(path))
	writeFile(t, tmp, content)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestGitCommitBecomesReceipt: a commit in the watched workdir (seen by
// the watcher, no polling) becomes a receipt naming the repository, with
// its subject secret-redacted, and a commit since the last visit.
func TestGitCommitBecomesReceipt(t *testing.T) {
	o := testOptions(t)
	wd := o.Workdir
	gitIn(t, wd, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(wd, "a.txt"), "a")
	gitIn(t, wd, "add", "a.txt")
	gitIn(t, wd, "commit", "-q", "-m", "first")
	r := startCapture(t, o)
	writeFile(t, filepath.Join(wd, "b.txt"), "b")
	gitIn(t, wd, "add", "b.txt")
	gitIn(t, wd, "commit", "-q", "-m", "rotate the key "+secretToken)
	got := waitResume(t, r.store, "the commit's receipt", func(res capsule.Resume) bool { return len(res.Receipts) > 0 })
	if len(got.Receipts) != 1 {
		t.Fatalf("receipts %q: want the one commit after the start (the first is where it stood)", got.Receipts)
	}
	rc := got.Receipts[0]
	if !strings.HasPrefix(rc, filepath.Base(wd)+"@") || strings.Contains(rc, "ghp_") || !strings.Contains(rc, "rotate the key") {
		t.Fatalf("receipt %q: want %s@<sha> and the subject without its secret", rc, filepath.Base(wd))
	}
	if c := got.SinceLastVisit.Commits; len(c) != 1 {
		t.Fatalf("since_last_visit commits %q", c)
	}
}

// hasReceipt accepts a resume with a receipt that holds s.
func hasReceipt(s string) func(capsule.Resume) bool {
	return func(r capsule.Resume) bool {
		return slices.ContainsFunc(r.Receipts, func(rc string) bool { return strings.Contains(rc, s) })
	}
}

// TestGitInitAfterStartIsFollowed: a repository created in the workdir
// after the capture started (git init and a first commit at once, before
// any check could see the repository empty) is followed: its commits
// become receipts naming it.
func TestGitInitAfterStartIsFollowed(t *testing.T) {
	o := testOptions(t)
	wd := o.Workdir
	r := startCapture(t, o)
	gitIn(t, wd, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(wd, "a.txt"), "a")
	gitIn(t, wd, "add", "a.txt")
	gitIn(t, wd, "commit", "-q", "-m", "the first commit")
	waitResume(t, r.store, "the first commit's receipt", hasReceipt("the first commit"))
	writeFile(t, filepath.Join(wd, "b.txt"), "b")
	gitIn(t, wd, "add", "b.txt")
	gitIn(t, wd, "commit", "-q", "-m", "the second commit")
	got := waitResume(t, r.store, "the second commit's receipt", hasReceipt("the second commit"))
	for _, rc := range got.Receipts {
		if !strings.HasPrefix(rc, filepath.Base(wd)+"@") {
			t.Fatalf("receipt %q: want the repository's name first", rc)
		}
	}
}

// TestGitCloneAfterStartIsFollowed: a repository cloned into the workdir
// after the start is followed from the cloned commit: its history is not
// taken for the agent's work, a commit made in the clone is a receipt.
func TestGitCloneAfterStartIsFollowed(t *testing.T) {
	o := testOptions(t)
	src := t.TempDir()
	gitIn(t, src, "init", "-q", "-b", "main")
	for _, m := range []string{"old history one", "old history two"} {
		writeFile(t, filepath.Join(src, "f.txt"), m)
		gitIn(t, src, "add", "f.txt")
		gitIn(t, src, "commit", "-q", "-m", m)
	}
	r := startCapture(t, o)
	gitIn(t, o.Workdir, "clone", "-q", src, "cloned")
	clone := filepath.Join(o.Workdir, "cloned")
	writeFile(t, filepath.Join(clone, "g.txt"), "g")
	gitIn(t, clone, "add", "g.txt")
	gitIn(t, clone, "commit", "-q", "-m", "work in the clone")
	got := waitResume(t, r.store, "the clone's commit's receipt", hasReceipt("work in the clone"))
	for _, rc := range got.Receipts {
		if strings.Contains(rc, "old history") || !strings.HasPrefix(rc, "cloned@") {
			t.Fatalf("receipts %q: want only the clone's new commit", got.Receipts)
		}
	}
}
