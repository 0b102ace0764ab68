package gitwatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
)

// TestPartialCloneExploit is the attack on a daemon run as root: the
// workdir's owner makes the repository a partial clone whose promisor
// remote is an ssh:// URL, sets core.sshCommand (and every other key that
// can start a program) to a script, and moves HEAD's branch, and another
// branch, to a commit that is not there. Check reports both moves, without
// a subject, and runs nothing; the same read as gitwatch made it before
// (git cat-file with the daemon's environment and the repository's
// config) runs the script.
func TestPartialCloneExploit(t *testing.T) {
	dir := t.TempDir()
	h := gittooltest.New(t, dir)
	missing := h.MakePartialClone(t)
	if err := os.Remove(filepath.Join(dir, ".git", "refs", "heads", "lazy")); err != nil {
		t.Fatal(err)
	}
	g, err := Open(dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	if g.Refused() != "" {
		t.Fatalf("git %s honours GIT_NO_LAZY_FETCH, yet the repository is refused: %s", testGit(t).Version, g.Refused())
	}
	if _, err := g.Check(); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"refs/heads/main", "refs/heads/lazy"} {
		if err := os.WriteFile(filepath.Join(dir, ".git", filepath.FromSlash(ref)), []byte(missing+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := g.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].SHA != missing || changes[0].Subject != "" || changes[1].Branch != "lazy" {
		t.Fatalf("changes = %+v", changes)
	}
	if f := h.Fired(); len(f) > 0 {
		t.Fatalf("reading the missing commit ran %v", f)
	}
	cmd := exec.Command("git", "--git-dir="+filepath.Join(dir, ".git"), "cat-file", "commit", missing)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Run()
	if !strings.Contains(strings.Join(h.Fired(), "\n"), gittooltest.MarkersOfPartialClone) {
		t.Fatalf("the control does not work: the old read did not run the ssh command: %v", h.Fired())
	}
}

// TestRefusedOnOldGit: a git too old to honour GIT_NO_LAZY_FETCH is not
// run on a partial clone at all: Refused says why (the daemon logs it and
// shows it as degraded), moves are still reported, a packed commit
// without its subject. Another repository's packed commits are read with
// git as before.
func TestRefusedOnOldGit(t *testing.T) {
	old := *testGit(t)
	old.Version = gittool.Version{Major: 2, Minor: 43, Patch: 3}
	r := newRepo(t)
	r.commit("first")
	r.git("gc", "-q", "--prune=now") // the commit is packed: only git reads it
	g, err := Open(r.dir, &old)
	if err != nil {
		t.Fatal(err)
	}
	g.Check()
	r.git("branch", "-q", "other")
	if ch, _ := g.Check(); len(ch) != 1 || ch[0].Subject != "first" || g.Refused() != "" {
		t.Fatalf("not a partial clone: %+v, refused %q", ch, g.Refused())
	}

	r.git("config", "remote.origin.promisor", "true")
	r.git("config", "remote.origin.url", "ssh://example.invalid/x")
	g, err = Open(r.dir, &old)
	if err != nil {
		t.Fatal(err)
	}
	if why := g.Refused(); !strings.Contains(why, "partial clone") || !strings.Contains(why, "2.43.3") {
		t.Fatalf("Refused = %q", why)
	}
	g.Check()
	r.git("branch", "-q", "another")
	ch, err := g.Check()
	if err != nil || len(ch) != 1 || ch[0].Branch != "another" || ch[0].Subject != "" {
		t.Fatalf("a partial clone: %+v, %v", ch, err)
	}
}
