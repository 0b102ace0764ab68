package worklost

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
)

// repoWithShapes is a committed repository whose tree holds every shape a
// path can have at a commit: files in the root and deep, an executable, a
// link, a submodule's commit, names with spaces, colons and a newline.
func repoWithShapes(t *testing.T, format string) (top, head string) {
	t.Helper()
	top = filepath.Join(t.TempDir(), "top")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	userGit(t, top, "init", "-q", "-b", "main", "--object-format="+format)
	for _, f := range []string{"root.go", "a/b/c.go", "a/b/d.go", "sub dir/x: y.txt", "work/src/m.go", "work/src/n.go", "work/top.md", "odd\nname/f.txt"} {
		write(t, top, f, "content of "+f+"\n")
	}
	if err := os.Chmod(filepath.Join(top, "a/b/d.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("root.go", filepath.Join(top, "work/link")); err != nil {
		t.Fatal(err)
	}
	userGit(t, top, "add", "-A")
	// A submodule's commit at work/mod, without a submodule checked out.
	userGit(t, top, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", len(userGit(t, top, "hash-object", "root.go")))+",work/mod")
	userGit(t, top, "commit", "-q", "-m", "shapes")
	return top, userGit(t, top, "rev-parse", "HEAD")
}

// objects through the long-lived cat-file says what `git ls-tree` says,
// for every shape of path, from the repository's top and from a workdir
// below it, for SHA-1 and SHA-256 repositories; and says it again from
// the directories it read.
func TestRepoObjectsAsLsTree(t *testing.T) {
	ctx := context.Background()
	for _, format := range []string{"sha1", "sha256"} {
		top, head := repoWithShapes(t, format)
		for _, c := range []struct {
			dir   string
			paths []string
		}{
			{top, []string{"root.go", "a/b/c.go", "a/b/d.go", "a/b", "a", "sub dir/x: y.txt", "work/link", "work/mod", "work/src/m.go",
				"nope.go", "nope/x.go", "root.go/x", "a/b/c.go/deeper", "work/mod/inside.go", "a/b/zz.go"}},
			{filepath.Join(top, "work"), []string{"top.md", "src/m.go", "src/n.go", "link", "mod", "src", "src/gone.go", "../root.go"}},
		} {
			r := NewRepo(testGit(t), c.dir)
			got, err := r.objects(ctx, head, c.paths)
			if err != nil {
				t.Fatal(err)
			}
			want, err := r.listed(ctx, head, c.paths)
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			if !maps.Equal(got, want) {
				t.Errorf("%s, in %s: cat-file's answers %v, ls-tree's %v", format, c.dir, got, want)
			}
			// Asked again, the directories read at that commit answer,
			// with no git process (the Repo is closed).
			again, err := r.objects(ctx, head, c.paths)
			if err != nil || !maps.Equal(again, want) {
				t.Errorf("%s, in %s: asked again: %v, %v; want %v from the directories read before", format, c.dir, again, err, want)
			}
			if len(want) < 4 {
				t.Errorf("%s, in %s: ls-tree found only %v: the test asks nothing", format, c.dir, want)
			}
		}
		// A name with a newline cannot be asked of cat-file: ls-tree is.
		r := NewRepo(testGit(t), top)
		got, err := r.objects(ctx, head, []string{"odd\nname/f.txt", "root.go"})
		r.Close()
		if err != nil || len(got) != 2 {
			t.Errorf("%s: a name with a newline: %v, %v", format, got, err)
		}
	}
}

// One long-lived reader follows HEAD as the user commits, packs the refs,
// collects garbage and switches branches; a workdir in no repository and
// one with no commit have no HEAD.
func TestRepoHeadFollowsTheRepository(t *testing.T) {
	ctx := context.Background()
	top, head := repoWithShapes(t, "sha1")
	r := NewRepo(testGit(t), top)
	defer r.Close()
	check := func(what, want string) {
		t.Helper()
		got, err := r.Head(ctx)
		if err != nil || got != want {
			t.Fatalf("%s: HEAD %q, %v; want %q", what, got, err, want)
		}
	}
	check("start", head)
	started := r.p
	write(t, top, "root.go", "changed\n")
	userGit(t, top, "commit", "-q", "-am", "two")
	check("after a commit", userGit(t, top, "rev-parse", "HEAD"))
	userGit(t, top, "pack-refs", "--all")
	write(t, top, "root.go", "changed again\n")
	userGit(t, top, "commit", "-q", "-am", "three")
	check("after pack-refs and a commit", userGit(t, top, "rev-parse", "HEAD"))
	userGit(t, top, "gc", "-q")
	check("after gc", userGit(t, top, "rev-parse", "HEAD"))
	userGit(t, top, "checkout", "-q", "-b", "other", "HEAD~2")
	check("after a checkout", head)
	if r.p != started {
		t.Error("the reader started another git process; one was to answer every question")
	}

	none := t.TempDir()
	elsewhere := NewRepo(testGit(t), none)
	defer elsewhere.Close()
	if got, err := elsewhere.Head(ctx); err != nil || got != "" {
		t.Errorf("in no repository: HEAD %q, %v; want none", got, err)
	}
	userGit(t, none, "init", "-q")
	if got, err := elsewhere.Head(ctx); err != nil || got != "" {
		t.Errorf("no commit yet: HEAD %q, %v; want none", got, err)
	}
}

// A reader whose git process was killed (the OOM killer, a context that
// ended just after an answer) asks a new one; a question whose context
// ends is refused with the context's error, and the next is answered; a
// closed reader has no process and answers nothing.
func TestRepoAfterItsProcessEnds(t *testing.T) {
	top, head := repoWithShapes(t, "sha1")
	r := NewRepo(testGit(t), top)
	if _, err := r.Head(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.p.Kill()
	if got, err := r.Head(context.Background()); err != nil || got != head {
		t.Fatalf("after its process was killed: %q, %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Head(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a question whose context ended: %v", err)
	}
	if got, err := r.Head(context.Background()); err != nil || got != head {
		t.Fatalf("the question after: %q, %v", got, err)
	}
	r.Close()
	if r.p != nil {
		t.Error("Close left the process")
	}
	if _, err := r.Head(context.Background()); err == nil {
		t.Error("a closed reader answered")
	}
}

// TestHostileRepositoryRunsNothing: the work-lost reads (HEAD, the objects
// of paths at a commit through cat-file and through ls-tree, at a commit
// the partial clone lacks too, and a whole Detect over a real store) of a
// repository whose config points every key that can start a program at a
// marker script, and whose promisor remote is reached through
// core.sshCommand, run none of them. Plain git reading the missing commit
// does run the ssh command (the attack is live).
func TestHostileRepositoryRunsNothing(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := gittooltest.New(t, work)
	missing := h.MakePartialClone(t)
	st, err := snapshot.Open(ctx, snapshot.Options{Dir: filepath.Join(t.TempDir(), "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := NewRepo(st.Tool(), work)
	t.Cleanup(r.Close)
	head, err := r.Head(ctx)
	if err != nil || head == "" {
		t.Fatalf("Head = %q, %v", head, err)
	}
	for _, commit := range []string{head, missing} {
		if _, err := r.objects(ctx, commit, []string{"a.txt", "b.txt", "dir/none"}); err != nil && commit == head {
			t.Fatal(err)
		}
		r.listed(ctx, commit, []string{"a.txt", "b.txt"})
	}
	before, _, err := st.Take(ctx, "start", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "b.txt"), []byte("uncommitted work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	held, _, _ := st.Take(ctx, "quiet", 2)
	if err := os.WriteFile(filepath.Join(work, "b.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, _, _ := st.Take(ctx, "quiet", 3)
	w, err := Detect(ctx, Input{Store: st, Repo: r, Before: Point{held.ID, head}, After: Point{after.ID, head}})
	if err != nil || w == nil || len(w.Paths) != 1 || w.Paths[0] != "b.txt" {
		t.Fatalf("Detect = %+v, %v (before %s)", w, err, before.ID)
	}
	if f := h.Fired(); len(f) > 0 {
		t.Fatalf("the work-lost reads ran %v", f)
	}
	h.Plain("cat-file", "commit", missing)
	if len(h.Fired()) == 0 {
		t.Fatal("the control does not work: plain git did not fetch the missing commit through the ssh command")
	}
}

// TestPartialCloneRefusedOnOldGit: with a git too old to honour
// GIT_NO_LAZY_FETCH, a partial clone is not read at all, and the error
// says why and what to do; a repository that is not one is read as ever.
func TestPartialCloneRefusedOnOldGit(t *testing.T) {
	ctx := context.Background()
	old := *testGit(t)
	old.Version = gittool.Version{Major: 2, Minor: 39, Patch: 3}
	plain := t.TempDir()
	userGit(t, plain, "init", "-q", "-b", "main")
	write(t, plain, "a.txt", "a\n")
	userGit(t, plain, "add", "-A")
	userGit(t, plain, "commit", "-q", "-m", "a")
	r := NewRepo(&old, filepath.Join(plain))
	defer r.Close()
	if head, err := r.Head(ctx); err != nil || head == "" {
		t.Fatalf("not a partial clone: Head = %q, %v", head, err)
	}

	work := t.TempDir()
	h := gittooltest.New(t, work)
	h.MakePartialClone(t)
	r = NewRepo(&old, filepath.Join(work))
	defer r.Close()
	_, err := r.Head(ctx)
	if !errors.Is(err, gittool.ErrRefused) || !strings.Contains(err.Error(), "partial clone") || !strings.Contains(err.Error(), "git 2.39.3") {
		t.Fatalf("Head = %v, want a refusal naming the partial clone and the git", err)
	}
	if _, err := r.listed(ctx, "HEAD", []string{"a.txt"}); !errors.Is(err, gittool.ErrRefused) {
		t.Fatalf("listed = %v", err)
	}
	if f := h.Fired(); len(f) > 0 {
		t.Fatalf("ran %v", f)
	}
}

// TestDubiousOwnership: as root over a repository another user owns, git
// refuses; the error says so in words a person reads (the daemon shows
// it as the reason work-lost checks are degraded). Without git, the error
// says to install it.
func TestDubiousOwnership(t *testing.T) {
	ctx := context.Background()
	if _, err := NewRepo(nil, t.TempDir()).Head(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no git: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("owning a repository by another user needs root")
	}
	top := t.TempDir()
	userGit(t, top, "init", "-q", "-b", "main")
	write(t, top, "a.txt", "a\n")
	userGit(t, top, "add", "-A")
	userGit(t, top, "commit", "-q", "-m", "a")
	if err := filepath.Walk(top, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 40001, 40001)
	}); err != nil {
		t.Fatal(err)
	}
	r := NewRepo(testGit(t), top)
	defer r.Close()
	_, err := r.Head(ctx)
	if !errors.Is(err, ErrDubiousOwnership) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Head = %v, want ErrDubiousOwnership on one line", err)
	}
	t.Log(err)
}
