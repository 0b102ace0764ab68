package gitwatch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/gittool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testGit is the git the daemon would find.
func testGit(t testing.TB) *gittool.Tool {
	t.Helper()
	tool, err := gittool.Find(context.Background(), "")
	if err != nil {
		t.Skip(err)
	}
	return tool
}

// gitEnv isolates git from the machine's and user's configuration.
func gitEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(),
		"HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=Agent", "GIT_COMMITTER_EMAIL=agent@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

type repo struct {
	t   *testing.T
	dir string
	env []string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	r := &repo{t: t, dir: filepath.Join(t.TempDir(), "proj"), env: gitEnv(t)}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.git("-c", "init.defaultBranch=main", "init", "-q")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	return runGit(r.t, r.dir, r.env, args...)
}

func runGit(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *repo) commit(msg string) string {
	r.t.Helper()
	f := filepath.Join(r.dir, "file.txt")
	old, _ := os.ReadFile(f)
	if err := os.WriteFile(f, append(old, msg+"\n"...), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", "file.txt")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func check(t *testing.T, g *Repo) []Change {
	t.Helper()
	ch, err := g.Check()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func expect(t *testing.T, got []Change, want ...Change) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d changes %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestCommitsBranchSwitchesAndPackedObjects(t *testing.T) {
	r := newRepo(t)
	g, err := Open(filepath.Join(r.dir), testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(r.dir)
	expect(t, check(t, g)) // first call: records the (unborn) state

	c1 := r.commit("first commit")
	got := check(t, g)
	expect(t, got, Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c1, Subject: "first commit"})
	if want := name + "@" + c1[:7] + " first commit"; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}
	expect(t, check(t, g)) // nothing moved

	// A subject is the first paragraph; two commits between Checks are both reported.
	c2 := r.commit("second: wrapped\nsubject line\n\nbody text")
	c3 := r.commit("third")
	expect(t, check(t, g),
		Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c2, PrevSHA: c1, Subject: "second: wrapped subject line"},
		Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c3, PrevSHA: c2, Subject: "third"})

	// Amend: a commit too.
	r.git("commit", "-q", "--amend", "-m", "third, amended")
	c3a := r.git("rev-parse", "HEAD")
	expect(t, check(t, g), Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c3a, PrevSHA: c3, Subject: "third, amended"})

	// Reset: HEAD moved, not a commit.
	r.git("reset", "-q", "--hard", c2)
	got = check(t, g)
	expect(t, got, Change{Kind: KindRefMoved, Repo: name, Branch: "main", SHA: c2, PrevSHA: c3a, Subject: "second: wrapped subject line"})
	if want := name + "@" + c2[:7] + " second: wrapped subject line (main moved from " + c3a[:7] + ")"; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}

	// Branch switch (a new branch: no separate ref_moved for it).
	r.git("checkout", "-q", "-b", "feature")
	got = check(t, g)
	expect(t, got, Change{Kind: KindBranchSwitch, Repo: name, Branch: "feature", PrevBranch: "main", SHA: c2, PrevSHA: c2, Subject: "second: wrapped subject line"})
	if want := name + ": switched to feature"; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}
	c4 := r.commit("on feature")
	expect(t, check(t, g), Change{Kind: KindCommit, Repo: name, Branch: "feature", SHA: c4, PrevSHA: c2, Subject: "on feature"})

	// Another branch moving, appearing, going.
	r.git("branch", "-f", "main", c4)
	r.git("branch", "extra", c1)
	got = check(t, g)
	expect(t, got,
		Change{Kind: KindRefMoved, Repo: name, Branch: "extra", SHA: c1, Subject: "first commit"},
		Change{Kind: KindRefMoved, Repo: name, Branch: "main", SHA: c4, PrevSHA: c2, Subject: "on feature"})
	if want := name + "@" + c1[:7] + " first commit (branch extra created)"; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}
	r.git("branch", "-D", "-q", "extra")
	got = check(t, g)
	expect(t, got, Change{Kind: KindRefMoved, Repo: name, Branch: "extra", PrevSHA: c1})
	if want := name + ": branch extra deleted"; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}

	// git gc packs objects and refs: nothing moved, and subjects still read.
	r.git("gc", "-q", "--prune=now")
	if _, err := os.Stat(filepath.Join(r.dir, ".git/objects", c4[:2], c4[2:])); err == nil {
		t.Fatal("gc left the commit loose: the test does not test packed objects")
	}
	if _, err := os.Stat(filepath.Join(r.dir, ".git/refs/heads/main")); err == nil {
		t.Fatal("gc left refs/heads/main loose: the test does not test packed-refs")
	}
	expect(t, check(t, g))
	r.git("checkout", "-q", "main") // main's commit is packed: read with git cat-file
	expect(t, check(t, g), Change{Kind: KindBranchSwitch, Repo: name, Branch: "main", PrevBranch: "feature", SHA: c4, PrevSHA: c4, Subject: "on feature"})
	c5 := r.commit("after gc") // loose commit, packed parent
	expect(t, check(t, g), Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c5, PrevSHA: c4, Subject: "after gc"})
	r.git("gc", "-q", "--prune=now")
	r.git("reset", "-q", "--hard", c2) // both packed now
	expect(t, check(t, g), Change{Kind: KindRefMoved, Repo: name, Branch: "main", SHA: c2, PrevSHA: c5, Subject: "second: wrapped subject line"})

	// Detached HEAD.
	r.git("checkout", "-q", "--detach", c1)
	got = check(t, g)
	expect(t, got, Change{Kind: KindBranchSwitch, Repo: name, PrevBranch: "main", SHA: c1, PrevSHA: c2, Subject: "first commit"})
	if want := name + ": switched to detached HEAD at " + c1[:7]; got[0].Receipt() != want {
		t.Errorf("Receipt() = %q, want %q", got[0].Receipt(), want)
	}
	c6 := r.commit("detached work")
	expect(t, check(t, g), Change{Kind: KindCommit, Repo: name, SHA: c6, PrevSHA: c1, Subject: "detached work"})

	// Open from a subdirectory finds the same worktree.
	if err := os.MkdirAll(filepath.Join(r.dir, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	g2, err := Open(filepath.Join(r.dir, "a/b"), testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	if g2.Root() != g.Root() {
		t.Errorf("Open(subdir).Root() = %q, want %q", g2.Root(), g.Root())
	}
}

func TestLinkedWorktree(t *testing.T) {
	r := newRepo(t)
	c1 := r.commit("base")
	wt := filepath.Join(filepath.Dir(r.dir), "wt")
	r.git("worktree", "add", "-q", "-b", "wtbranch", wt)
	if fi, err := os.Lstat(filepath.Join(wt, ".git")); err != nil || fi.IsDir() {
		t.Fatalf("worktree .git is not a file: %v", err)
	}
	g, err := Open(wt, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	main, err := Open(r.dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, check(t, g))
	expect(t, check(t, main))

	f := filepath.Join(wt, "wt.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, wt, r.env, "add", "wt.txt")
	runGit(t, wt, r.env, "commit", "-q", "-m", "in the worktree")
	c2 := runGit(t, wt, r.env, "rev-parse", "HEAD")
	expect(t, check(t, g), Change{Kind: KindCommit, Repo: "wt", Branch: "wtbranch", SHA: c2, PrevSHA: c1, Subject: "in the worktree"})
	// The main worktree sees the shared branch move, not a commit on its HEAD.
	expect(t, check(t, main), Change{Kind: KindRefMoved, Repo: filepath.Base(r.dir), Branch: "wtbranch", SHA: c2, PrevSHA: c1, Subject: "in the worktree"})
	if g.Branch() != "wtbranch" || main.Branch() != "main" {
		t.Errorf("branches: worktree %q, main %q", g.Branch(), main.Branch())
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(t.TempDir(), testGit(t)); err == nil {
		t.Error("Open outside a repository: no error")
	}
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, ".git"), []byte("not a gitdir line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d, testGit(t)); err == nil {
		t.Error("Open with a bad .git file: no error")
	}
	d = t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, ".git/reftable"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, ".git/HEAD"), []byte("ref: refs/heads/.invalid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d, testGit(t)); err != ErrReftable {
		t.Errorf("Open of a reftable repository: %v, want ErrReftable", err)
	}
}

func TestParseCommit(t *testing.T) {
	body := "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n" +
		"parent 1111111111111111111111111111111111111111\n" +
		"parent 2222222222222222222222222222222222222222\n" +
		"author A <a@x> 1700000000 +0000\n" +
		"committer A <a@x> 1700000000 +0000\n" +
		"gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n" +
		"\n" +
		"Merge branch 'x'\r\n  into main\n\nbody\n"
	c := parseCommit("3333333333333333333333333333333333333333", []byte(body))
	if len(c.parents) != 2 || c.parents[1] != "2222222222222222222222222222222222222222" {
		t.Errorf("parents = %v", c.parents)
	}
	if c.subject != "Merge branch 'x' into main" {
		t.Errorf("subject = %q", c.subject)
	}
	for msg, want := range map[string]string{
		"crlf subject\r\n\r\nbody\r\n": "crlf subject",
		"a\n  \nb":                     "a",
		"\n\nleading blank lines\n":    "leading blank lines",
		"":                             "",
	} {
		c := parseCommit("x", []byte("tree t\n\n"+msg))
		if c.subject != want {
			t.Errorf("subject of %q = %q, want %q", msg, c.subject, want)
		}
	}
}

func TestReceipt(t *testing.T) {
	sha := "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		c    Change
		want string
	}{
		{Change{Kind: KindCommit, Repo: "proj", SHA: sha, Subject: "fix the parser"}, "proj@0123456 fix the parser"},
		{Change{Kind: KindCommit, Repo: "proj", SHA: sha}, "proj@0123456"},
		{Change{Kind: KindBranchSwitch, Repo: "proj", Branch: "feat/x", SHA: sha}, "proj: switched to feat/x"},
		{Change{Kind: KindBranchSwitch, Repo: "proj", SHA: sha}, "proj: switched to detached HEAD at 0123456"},
		{Change{Kind: KindRefMoved, Repo: "proj", Branch: "main", SHA: sha, PrevSHA: sha, Subject: "s"}, "proj@0123456 s (main moved from 0123456)"},
		{Change{Kind: KindRefMoved, Repo: "proj", Branch: "b", SHA: sha, Subject: "s"}, "proj@0123456 s (branch b created)"},
		{Change{Kind: KindRefMoved, Repo: "proj", Branch: "b", PrevSHA: sha}, "proj: branch b deleted"},
	} {
		if got := tt.c.Receipt(); got != tt.want {
			t.Errorf("%+v.Receipt() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// watchRepo runs a work-directory watcher on root whose OnGitEvent runs
// g.Check; the receipts come out of the returned channel.
func watchRepo(t *testing.T, root string, g *Repo) <-chan string {
	t.Helper()
	expect(t, check(t, g))
	receipts := make(chan string, 16)
	w, err := watch.New(watch.Options{
		Root:  root,
		Quiet: 100 * time.Millisecond,
		OnGitEvent: func(dir string) {
			if dir != g.Root() {
				t.Errorf("OnGitEvent(%q), want %q", dir, g.Root())
				return
			}
			ch, err := g.Check()
			if err != nil {
				t.Error(err)
				return
			}
			for _, c := range ch {
				receipts <- c.Receipt()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(watch.Summary) {}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-w.Ready()
	return receipts
}

func wantReceipt(t *testing.T, receipts <-chan string, receipt string) {
	t.Helper()
	start := time.Now()
	select {
	case got := <-receipts:
		if got != receipt {
			t.Errorf("receipt %q, want %q", got, receipt)
		}
		t.Logf("%q after %v", got, time.Since(start).Round(time.Millisecond))
	case <-time.After(time.Second):
		t.Fatalf("no receipt %q within 1s", receipt)
	}
}

func noReceipt(t *testing.T, receipts <-chan string) {
	t.Helper()
	select {
	case extra := <-receipts:
		t.Errorf("unexpected receipt %q", extra)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestWatcherReportsCommit wires the work-directory watcher to Check: a
// commit is reported within a second of `git commit` returning, with no
// polling anywhere.
func TestWatcherReportsCommit(t *testing.T) {
	r := newRepo(t)
	r.commit("before the watch")
	g, err := Open(r.dir, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	receipts := watchRepo(t, r.dir, g)
	name := filepath.Base(r.dir)
	sha := r.commit("watched commit")
	wantReceipt(t, receipts, name+"@"+sha[:7]+" watched commit")
	r.git("checkout", "-q", "-b", "next")
	wantReceipt(t, receipts, name+": switched to next")
	sha = r.commit("on next")
	wantReceipt(t, receipts, name+"@"+sha[:7]+" on next")
	r.git("gc", "-q", "--prune=now") // packs refs and objects: nothing moved
	noReceipt(t, receipts)
	sha = r.commit("after gc")
	wantReceipt(t, receipts, name+"@"+sha[:7]+" after gc")
	noReceipt(t, receipts)
}

// TestWatcherLinkedWorktree: the watched directory is a linked worktree,
// whose HEAD and refs live outside it.
func TestWatcherLinkedWorktree(t *testing.T) {
	r := newRepo(t)
	r.commit("base")
	wt := filepath.Join(filepath.Dir(r.dir), "wt")
	r.git("worktree", "add", "-q", "-b", "wtbranch", wt)
	g, err := Open(wt, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	receipts := watchRepo(t, wt, g)
	if err := os.WriteFile(filepath.Join(wt, "wt.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, wt, r.env, "add", "wt.txt")
	runGit(t, wt, r.env, "commit", "-q", "-m", "in the worktree")
	sha := runGit(t, wt, r.env, "rev-parse", "HEAD")
	wantReceipt(t, receipts, "wt@"+sha[:7]+" in the worktree")
	runGit(t, wt, r.env, "checkout", "-q", "-b", "wt2")
	wantReceipt(t, receipts, "wt: switched to wt2")
}

// TestWatcherRootInsideRepo: the watched directory is a subdirectory of a
// repository; commits are still reported, for the repository's root.
func TestWatcherRootInsideRepo(t *testing.T) {
	r := newRepo(t)
	r.commit("base")
	sub := filepath.Join(r.dir, "services", "api")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := Open(sub, testGit(t))
	if err != nil {
		t.Fatal(err)
	}
	receipts := watchRepo(t, sub, g)
	sha := r.commit("from the repository root")
	wantReceipt(t, receipts, filepath.Base(r.dir)+"@"+sha[:7]+" from the repository root")
}

// TestCheckFromReportsWhatMovedWhileAway: a second run handed the HEAD an
// earlier run saw reports the commits, the switch and the reset made in
// between, and nothing when HEAD stands where it was.
func TestCheckFromReportsWhatMovedWhileAway(t *testing.T) {
	r := newRepo(t)
	name := filepath.Base(r.dir)
	c1 := r.commit("first")
	open := func() *Repo {
		g, err := Open(r.dir, testGit(t))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := open()
	expect(t, check(t, first))
	seen := first.Head()
	if seen != (Head{Symref: "refs/heads/main", SHA: c1}) {
		t.Fatalf("Head() = %+v", seen)
	}

	// Nothing moved while away: nothing to report.
	g := open()
	got, err := g.CheckFrom(seen)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got)

	// A commit while away is a commit.
	c2 := r.commit("second")
	got, err = open().CheckFrom(seen)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got, Change{Kind: KindCommit, Repo: name, Branch: "main", SHA: c2, PrevSHA: c1, Subject: "second"})

	// A reset while away is HEAD moved.
	r.git("reset", "-q", "--hard", c1)
	got, err = open().CheckFrom(Head{Symref: "refs/heads/main", SHA: c2})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got, Change{Kind: KindRefMoved, Repo: name, Branch: "main", SHA: c1, PrevSHA: c2, Subject: "first"})

	// A switch while away is a switch, and only that (main did not move).
	r.git("checkout", "-q", "-b", "feature")
	g = open()
	got, err = g.CheckFrom(seen)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got, Change{Kind: KindBranchSwitch, Repo: name, Branch: "feature", PrevBranch: "main", SHA: c1, PrevSHA: c1, Subject: "first"})
	// Once checked, CheckFrom is Check.
	got, err = g.CheckFrom(Head{Symref: "refs/heads/main", SHA: c2})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got)
}
