package gitwatch

import (
	"path/filepath"
	"testing"
	"time"
)

// TestCheckNewReportsCommitsMadeBeforeTheFirstCheck: a repository that
// appeared while watched is followed from how it was created: a first
// commit made before the first check is reported (Check would take it for
// the starting point), an existing history is not.
func TestCheckNewReportsCommitsMadeBeforeTheFirstCheck(t *testing.T) {
	since := time.Now().Add(-time.Minute)
	r := newRepo(t)
	name := filepath.Base(r.dir)
	c1 := r.commit("first commit")
	c2 := r.commit("second commit")
	g, err := Open(r.dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := g.CheckNew(since)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ch,
		Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c1, Subject: "first commit"},
		Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c2, PrevSHA: c1, Subject: "second commit"})
	c3 := r.commit("third commit")
	ch, _ = g.CheckNew(since) // checked already: Check
	expect(t, ch, Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c3, PrevSHA: c2, Subject: "third commit"})

	// Plain Check takes the first state for the starting point.
	g2, _ := Open(r.dir, testGit(t))
	expect(t, check(t, g2))
}

// TestCheckNewSkipsOldHistory: a repository moved in (or seen late) keeps
// its history: commits older than since are not new work.
func TestCheckNewSkipsOldHistory(t *testing.T) {
	r := newRepo(t)
	name := filepath.Base(r.dir)
	old := r.env
	r.env = append(old, "GIT_COMMITTER_DATE=2001-01-01T00:00:00Z")
	r.commit("old one")
	r.commit("old two")
	r.env = old
	since := time.Now().Add(-time.Minute)
	c3 := r.commit("new work")
	g, err := Open(r.dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := g.CheckNew(since)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch) != 1 || ch[0].SHA != c3 || ch[0].Kind != KindCommit || ch[0].Repo != name {
		t.Fatalf("changes %+v, want only the commit %s", ch, c3)
	}
}

// TestCheckNewClone: a clone's history (however recent) is not new work;
// a commit made in the clone is, before or after the first check, and the
// clone setting HEAD to the remote's branch is no branch switch.
func TestCheckNewClone(t *testing.T) {
	src := newRepo(t)
	src.commit("upstream one")
	src.commit("upstream two")
	since := time.Now().Add(-time.Minute)
	dir := filepath.Join(t.TempDir(), "clone")
	runGit(t, filepath.Dir(dir), src.env, "-c", "init.defaultBranch=master", "clone", "-q", src.dir, dir)
	g, err := Open(dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := g.CheckNew(since)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ch)
	c := &repo{t: t, dir: dir, env: src.env}
	mine := c.commit("work in the clone")
	ch, _ = g.CheckNew(since)
	if len(ch) != 1 || ch[0].SHA != mine || ch[0].Kind != KindCommit {
		t.Fatalf("changes %+v, want the commit %s", ch, mine)
	}

	// A clone seen half-way (HEAD unborn on git's default branch) then complete.
	dir2 := filepath.Join(t.TempDir(), "clone2")
	runGit(t, filepath.Dir(dir2), src.env, "clone", "-q", src.dir, dir2)
	g2, _ := Open(dir2, testGit(t))
	g2.mu.Lock()
	g2.seen, g2.state, g2.since = true, state{symref: "refs/heads/master", heads: map[string]string{}}, since.Unix()
	g2.mu.Unlock()
	ch, _ = g2.CheckNew(since)
	expect(t, ch)
}
