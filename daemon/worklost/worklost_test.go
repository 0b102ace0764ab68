package worklost

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/snapshot"
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

// userGit runs git in dir as a person would, isolated from the machine's
// configuration.
func userGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bench is a repository with committed files, a store, and the agent's
// uncommitted work held by a snapshot.
type bench struct {
	t      *testing.T
	ctx    context.Context
	work   string
	store  *snapshot.Store
	repo   *Repo
	seq    uint64
	before Point
}

func newBench(t *testing.T) *bench {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	userGit(t, work, "init", "-q", "-b", "main")
	write(t, work, "src/a.go", "package a // committed\n")
	write(t, work, "README.md", "committed\n")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "start")
	st, err := snapshot.Open(ctx, snapshot.Options{Dir: filepath.Join(root, "state", "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	repo := NewRepo(testGit(t), work)
	t.Cleanup(repo.Close)
	b := &bench{t: t, ctx: ctx, work: work, store: st, repo: repo}
	b.take() // the tree as the daemon found it
	// An hour of the agent's work, not committed: a modified file and a new one.
	write(t, work, "src/a.go", "package a // an hour of work\n")
	write(t, work, "src/new.go", "package a // new, never added\n")
	b.before = b.take()
	return b
}

// take snapshots the tree and returns it with HEAD as it is now.
func (b *bench) take() Point {
	b.t.Helper()
	b.seq++
	snap, _, err := b.store.Take(b.ctx, "quiet", b.seq)
	if err != nil {
		b.t.Fatal(err)
	}
	head, err := b.repo.Head(b.ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	return Point{Snapshot: snap.ID, Head: head}
}

func (b *bench) detect(after Point, restored ...string) *WorkLost {
	b.t.Helper()
	wl, err := Detect(b.ctx, Input{Store: b.store, Repo: b.repo, Before: b.before, After: after,
		Restored: restored, At: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)})
	if err != nil {
		b.t.Fatal(err)
	}
	return wl
}

// Each way of throwing uncommitted work away gives one WorkLost naming the
// paths and the snapshot, and restoring those paths from it (what the
// restore command asks the daemon to do) brings the work back.
func TestWorkLostEachWay(t *testing.T) {
	for _, c := range []struct {
		name  string
		do    func(t *testing.T, work string)
		paths []string
	}{
		{"git checkout -- .", func(t *testing.T, w string) { userGit(t, w, "checkout", "--", ".") }, []string{"src/a.go"}},
		{"git reset --hard", func(t *testing.T, w string) { userGit(t, w, "reset", "-q", "--hard") }, []string{"src/a.go"}},
		{"git stash", func(t *testing.T, w string) { userGit(t, w, "stash", "-q") }, []string{"src/a.go"}},
		{"git stash -u", func(t *testing.T, w string) { userGit(t, w, "stash", "-q", "-u") }, []string{"src/a.go", "src/new.go"}},
		{"rm", func(t *testing.T, w string) {
			for _, p := range []string{"src/a.go", "src/new.go"} {
				if err := os.Remove(filepath.Join(w, p)); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"src/a.go", "src/new.go"}},
		{"an editor's revert", func(t *testing.T, w string) { write(t, w, "src/a.go", "package a // committed\n") }, []string{"src/a.go"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBench(t)
			c.do(t, b.work)
			after := b.take()
			wl := b.detect(after)
			if wl == nil {
				t.Fatal("no work lost")
			}
			if !reflect.DeepEqual(wl.Paths, c.paths) || wl.Snapshot != b.before.Snapshot {
				t.Fatalf("lost %v from %s, want %v from %s", wl.Paths, wl.Snapshot, c.paths, b.before.Snapshot)
			}
			if want := "continuityd snapshot restore --lost " + wl.ID; wl.ID != ID(wl.Snapshot, wl.At) || wl.Restore != want {
				t.Errorf("id %q, restore = %q, want %q", wl.ID, wl.Restore, want)
			}
			want := "continuityd snapshot restore " + b.before.Snapshot + " --path " + strings.Join(c.paths, " --path ")
			if wl.RestorePaths != want {
				t.Errorf("restore_paths = %q, want %q", wl.RestorePaths, want)
			}
			// The command's restore, through the store's restore.
			if _, err := b.store.Restore(b.ctx, wl.Snapshot, wl.Paths, false); err != nil {
				t.Fatal(err)
			}
			if got := read(t, b.work, "src/a.go"); got != "package a // an hour of work\n" {
				t.Errorf("after the restore src/a.go = %q", got)
			}
			if got := read(t, b.work, "src/new.go"); got != "package a // new, never added\n" {
				t.Errorf("after the restore src/new.go = %q", got)
			}
			// Told once: from the lost state onwards nothing more is lost.
			from := *b
			from.before = after
			if wl := from.detect(b.take()); wl != nil {
				t.Errorf("the restore itself was taken for a loss: %+v", wl)
			}
		})
	}
}

// Work that a commit holds is not lost, even when the tree is then reset;
// neither is work going on (a file edited further), nor a deletion.
func TestWorkLostNotWhenCommittedOrGoingOn(t *testing.T) {
	b := newBench(t)
	userGit(t, b.work, "add", "-A")
	userGit(t, b.work, "commit", "-q", "-m", "the work")
	if wl := b.detect(b.take()); wl != nil {
		t.Errorf("a commit: %+v", wl)
	}

	b = newBench(t)
	userGit(t, b.work, "commit", "-q", "-am", "the work")
	userGit(t, b.work, "reset", "-q", "--hard")
	for _, p := range []string{"src/a.go", "src/new.go"} {
		if err := os.Remove(filepath.Join(b.work, p)); err != nil {
			t.Fatal(err)
		}
	}
	if wl := b.detect(b.take()); wl == nil || !reflect.DeepEqual(wl.Paths, []string{"src/new.go"}) {
		t.Errorf("a.go committed, both removed: %+v, want only src/new.go lost (the commit holds a.go)", wl)
	}

	b = newBench(t)
	write(t, b.work, "src/a.go", "package a // two hours of work\n")
	if err := os.Remove(filepath.Join(b.work, "README.md")); err != nil {
		t.Fatal(err)
	}
	if wl := b.detect(b.take()); wl != nil {
		t.Errorf("work going on, a committed file deleted: %+v", wl)
	}
}

// A restore by the daemon itself is not a loss; the same change by a
// command is (the exclusion is what keeps it out).
func TestWorkLostNotByTheDaemonsRestore(t *testing.T) {
	b := newBench(t)
	list, err := b.store.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := list[len(list)-1].ID // the oldest: the tree as the daemon found it
	res, err := b.store.Restore(b.ctx, first, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var restored []string
	for _, c := range res.Changes {
		restored = append(restored, c.Path)
	}
	after := b.take()
	if wl := b.detect(after, restored...); wl != nil {
		t.Errorf("the daemon's restore: %+v", wl)
	}
	if wl := b.detect(after); wl == nil || len(wl.Paths) != 2 {
		t.Errorf("the same change not named as the daemon's: %+v, want 2 paths lost", wl)
	}
}

// The per-path command gives each name as termsafe.Name prints it (which
// --path reads back), in single quotes when a shell would split or expand
// it: no control character, no $'…'.
func TestPathsCommandQuoting(t *testing.T) {
	got := PathsCommand("0123abcd", "reviewer", ExactPaths([]string{"src/a.go", "my file.txt", "it's", "bad\x1b[2Jname\n", "$(rm -rf ~)", "-x", "\xffb`q`"}))
	want := `continuityd snapshot restore 0123abcd --agent reviewer --path src/a.go --path 'my file.txt' --path 'it'\''s' --path '"bad\033[2Jname\n"' --path '$(rm -rf ~)' --path -x --path '"\377b` + "`q`" + `"'`
	if got != want {
		t.Errorf("PathsCommand =\n%s\nwant\n%s", got, want)
	}
	if got := RestoreCommand("wl-0123456789ab", "my agent"); got != "continuityd snapshot restore --lost wl-0123456789ab --agent 'my agent'" {
		t.Errorf("RestoreCommand = %s", got)
	}
}

// Outside any repository nothing is committed: a file a snapshot held and
// an rm took is lost all the same.
func TestWorkLostWithoutRepository(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	write(t, work, "notes.txt", "an hour of notes\n")
	repo := NewRepo(testGit(t), work)
	defer repo.Close()
	if head, err := repo.Head(ctx); err != nil || head != "" {
		t.Fatalf("Head outside a repository = %q, %v", head, err)
	}
	st, err := snapshot.Open(ctx, snapshot.Options{Dir: filepath.Join(root, "state", "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before, _, err := st.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(work, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	after, _, err := st.Take(ctx, "quiet", 2)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := Detect(ctx, Input{Store: st, Repo: repo, Agent: "builder", Before: Point{Snapshot: before.ID}, After: Point{Snapshot: after.ID}})
	if err != nil || wl == nil || !reflect.DeepEqual(wl.Paths, []string{"notes.txt"}) {
		t.Fatalf("Detect = %+v, %v", wl, err)
	}
	if want := "continuityd snapshot restore " + before.ID + " --agent builder --path notes.txt"; wl.RestorePaths != want {
		t.Errorf("restore_paths = %q, want %q", wl.RestorePaths, want)
	}
	if want := "continuityd snapshot restore --lost " + wl.ID + " --agent builder"; wl.Restore != want {
		t.Errorf("restore = %q, want %q", wl.Restore, want)
	}
}
