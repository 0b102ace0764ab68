package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		os.Exit(benchWriter(dir))
	}
	goleak.VerifyTestMain(m)
}

const testQuiet = 100 * time.Millisecond

// harness runs a Watcher on a temp dir and collects its summaries.
type harness struct {
	t      *testing.T
	w      *Watcher
	root   string
	sums   chan Summary
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error

	mu   sync.Mutex
	seen map[string]int // path → summaries listing it
	all  []Summary
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a Watcher on root; prepare can set test seams before Run.
func start(t *testing.T, root string, o Options, prepare func(*Watcher)) *harness {
	t.Helper()
	h := &harness{t: t, root: root, sums: make(chan Summary, 1024), logs: &syncBuffer{}, done: make(chan error, 1), seen: map[string]int{}}
	o.Root = root
	if o.Quiet == 0 {
		o.Quiet = testQuiet
	}
	o.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	if prepare != nil {
		prepare(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.done <- w.Run(ctx, func(s Summary) {
			h.mu.Lock()
			for _, p := range s.Paths {
				h.seen[p]++
			}
			h.all = append(h.all, s)
			h.mu.Unlock()
			h.sums <- s
		})
	}()
	t.Cleanup(h.stop)
	select {
	case <-w.Ready():
	case err := <-h.done:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("watcher not ready after 10s")
	}
	return h
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		h.t.Error("Run did not return within 60 s of cancel")
	}
}

// waitPaths waits until every path has been listed by some summary.
func (h *harness) waitPaths(timeout time.Duration, paths ...string) {
	h.t.Helper()
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		missing := []string{}
		for _, p := range paths {
			if h.seen[p] == 0 {
				missing = append(missing, p)
			}
		}
		h.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-h.sums:
		case <-deadline:
			h.t.Fatalf("not reported within %v: %v (summaries: %+v)", timeout, missing, h.summaries())
		}
	}
}

// settle waits until no summary has come for a while, so everything
// pending has been reported.
func (h *harness) settle() {
	for {
		select {
		case <-h.sums:
		case <-time.After(3 * testQuiet):
			return
		}
	}
}

func (h *harness) summaries() []Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.all)
}

func (h *harness) seenPaths() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]int, len(h.seen))
	for k, v := range h.seen {
		m[k] = v
	}
	return m
}

func (h *harness) reset() {
	h.settle()
	h.mu.Lock()
	clear(h.seen)
	h.all = nil
	h.mu.Unlock()
}

func (h *harness) write(rel, data string) {
	h.t.Helper()
	p := filepath.Join(h.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func mustWrite(t testing.TB, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNestedDirsCreatedAfterStart(t *testing.T) {
	h := start(t, t.TempDir(), Options{}, nil)
	if err := os.MkdirAll(filepath.Join(h.root, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.write("a/b/c/f.txt", "x")
	h.waitPaths(60*time.Second, "a/b/c/f.txt")

	// The new directories are watched: later files in them are seen too.
	h.write("a/b/c/g.txt", "y")
	h.write("a/h.txt", "z")
	h.waitPaths(60*time.Second, "a/b/c/g.txt", "a/h.txt")
	if n := h.w.Stats().WatchedDirs; n != 4 {
		t.Errorf("WatchedDirs = %d, want 4 (root, a, a/b, a/b/c)", n)
	}
	for p := range h.seenPaths() {
		if strings.HasSuffix(p, "/") || p == "a" || p == "a/b" {
			t.Errorf("directory creation listed as a path: %q", p)
		}
	}
}

func TestFilesCreatedBeforeTheirDirIsWatched(t *testing.T) {
	h := start(t, t.TempDir(), Options{MaxPaths: 1000}, nil)
	var want []string
	for i := range 200 {
		d := filepath.Join(h.root, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(d, "f"), "x")
		want = append(want, fmt.Sprintf("d%03d/f", i))
		if i%4 == 0 { // and deeper, in one go
			p := fmt.Sprintf("n%03d/x/y/z/f", i)
			h.write(p, "x")
			want = append(want, p)
		}
	}
	h.waitPaths(60*time.Second, want...)
}

func TestRenameOverSaveReportsTargetOnly(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "x.go"), "package x\n")
	mustWrite(t, filepath.Join(root, "y.go"), "package y\n")
	h := start(t, root, Options{}, nil)
	rename := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(root, from), filepath.Join(root, to)); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(p string) {
		t.Helper()
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	// An agent's atomic write.
	h.write("x.go.tmp.4711.1700000000", "package x // 2\n")
	rename("x.go.tmp.4711.1700000000", "x.go")
	h.write("x.go.tmp123", "package x // 3\n")
	rename("x.go.tmp123", "x.go")
	// vim: swap file, the 4913 probe, backup by rename, write, drop backup.
	h.write(".y.go.swp", "swap")
	h.write("4913", "")
	remove("4913")
	rename("y.go", "y.go~")
	h.write("y.go", "package y // 2\n")
	remove("y.go~")
	remove(".y.go.swp")

	h.waitPaths(60*time.Second, "x.go", "y.go")
	h.settle()
	seen := h.seenPaths()
	for p, n := range seen {
		if p != "x.go" && p != "y.go" {
			t.Errorf("temp name reported: %q", p)
		}
		if n != 1 {
			t.Errorf("%q listed by %d summaries, want 1", p, n)
		}
	}
	for _, s := range h.summaries() {
		if s.Count != len(s.Paths) {
			t.Errorf("summary %+v: Count %d != listed %d", s, s.Count, len(s.Paths))
		}
	}
}

func TestDirectoryRenamedWithinTree(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "a/sub/f.txt"), "x")
	h := start(t, root, Options{}, nil)
	if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	h.waitPaths(60*time.Second, "a/", "b/sub/f.txt")
	h.reset()
	h.write("b/sub/g.txt", "y")
	h.waitPaths(60*time.Second, "b/sub/g.txt")
	h.settle()
	for p := range h.seenPaths() {
		if strings.HasPrefix(p, "a/") {
			t.Errorf("event reported under the old name: %q", p)
		}
	}
	if n := h.w.Stats().WatchedDirs; n != 3 {
		t.Errorf("WatchedDirs = %d, want 3 (root, b, b/sub)", n)
	}
	// Removal drops the watches.
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	h.waitPaths(60*time.Second, "b/")
	if n := h.w.Stats().WatchedDirs; n != 1 {
		t.Errorf("WatchedDirs after removal = %d, want 1", n)
	}
}

func TestIgnoreRules(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, ".gitignore"), "*.log\n/gen/\n")
	mustWrite(t, filepath.Join(root, "sub/.gitignore"), "!keep.log\nlocal/\n")
	mustWrite(t, filepath.Join(root, "node_modules/pkg/index.js"), "old")
	mustWrite(t, filepath.Join(root, "gen/old.txt"), "old")
	mustWrite(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(root, ".git/info/exclude"), "*.excluded\n")
	h := start(t, root, Options{Ignore: []string{"*.secret", "!important.log"}, IgnoreDirs: []string{"node_modules"}}, nil)

	if n := h.w.Stats().WatchedDirs; n != 3 {
		t.Errorf("WatchedDirs = %d, want 3 (root, sub, .git)", n)
	}
	h.write("a.log", "ignored by .gitignore")
	h.write("important.log", "re-included by Options.Ignore")
	h.write("sub/b.log", "ignored from the parent's .gitignore")
	h.write("sub/keep.log", "re-included by sub/.gitignore")
	h.write("sub/local/x.txt", "ignored: local/ in sub")
	h.write("local/y.txt", "not ignored: local/ is only sub's")
	h.write("gen/new.txt", "ignored: /gen/")
	h.write("deep/gen/z.txt", "not ignored: /gen/ is anchored")
	h.write("node_modules/pkg/new.js", "ignored by IgnoreDirs")
	h.write("web/node_modules/x/y.js", "ignored by IgnoreDirs at depth")
	h.write("key.secret", "ignored by Options.Ignore")
	h.write("a.excluded", "ignored by .git/info/exclude")
	h.write(".git/objects/ab/cdef", "git internals")
	h.write(".git/index", "git internals")
	h.write("real.txt", "reported")
	h.waitPaths(60*time.Second, "real.txt", "important.log", "sub/keep.log", "local/y.txt", "deep/gen/z.txt")
	h.settle()
	want := []string{"real.txt", "important.log", "sub/keep.log", "local/y.txt", "deep/gen/z.txt"}
	for p := range h.seenPaths() {
		if !slices.Contains(want, p) {
			t.Errorf("ignored path reported: %q", p)
		}
	}

	// A .gitignore change applies at once; un-ignoring a directory watches it.
	h.reset()
	before := h.w.Stats().WatchedDirs
	mustWrite(t, filepath.Join(root, ".gitignore"), "*.log\n*.txt\n")
	h.waitPaths(60*time.Second, ".gitignore")
	h.write("new.txt", "ignored now")
	h.write("new.md", "reported")
	h.waitPaths(60*time.Second, "new.md")
	waitFor(t, 60*time.Second, "gen/ watched after the .gitignore change", func() bool {
		return h.w.Stats().WatchedDirs == before+1
	})
	h.write("gen/other.md", "reported: gen/ is no longer ignored")
	h.waitPaths(60*time.Second, "gen/other.md")
	h.settle()
	if h.seenPaths()["new.txt"] != 0 {
		t.Error("new.txt reported after *.txt was added to .gitignore")
	}
}

// TestRootInsideRepository: the .gitignore files between the enclosing
// repository's root and Root apply; the repository's git directory is
// watched for OnGitEvent.
func TestRootInsideRepository(t *testing.T) {
	repo := t.TempDir()
	mustWrite(t, filepath.Join(repo, ".gitignore"), "*.log\n/svc/api/gen/\n")
	mustWrite(t, filepath.Join(repo, "svc/.gitignore"), "*.tmpdata\n")
	mustWrite(t, filepath.Join(repo, ".git/HEAD"), "ref: refs/heads/main\n")
	if err := os.MkdirAll(filepath.Join(repo, ".git/refs/heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(repo, "svc/api")
	if err := os.MkdirAll(filepath.Join(root, "gen"), 0o755); err != nil {
		t.Fatal(err)
	}
	calls := make(chan string, 10)
	h := start(t, root, Options{OnGitEvent: func(dir string) { calls <- dir }}, nil)
	h.write("a.log", "ignored by the repository root's .gitignore")
	h.write("x.tmpdata", "ignored by svc/.gitignore")
	h.write("gen/out.go", "ignored: anchored at the repository root")
	h.write("main.go", "reported")
	h.waitPaths(60*time.Second, "main.go")
	h.settle()
	if got := h.seenPaths(); len(got) != 1 {
		t.Errorf("reported %v, want only main.go", got)
	}
	mustWrite(t, filepath.Join(repo, ".git/refs/heads/main"), "0123456789012345678901234567890123456789\n")
	select {
	case dir := <-calls:
		if want, _ := filepath.EvalSymlinks(repo); dir != want {
			t.Errorf("OnGitEvent(%q), want %q", dir, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no OnGitEvent for the enclosing repository")
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOverflowRescans(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "old/untouched.txt"), "old")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "old/untouched.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	var failLost sync.Map // set: Add fails for "lost", standing in for events the kernel dropped
	failLost.Store("on", true)
	h := start(t, root, Options{}, func(w *Watcher) {
		w.addHook = func(p string) error {
			if _, on := failLost.Load("on"); on && filepath.Base(p) == "lost" {
				return syscall.EACCES
			}
			return nil
		}
	})
	if err := os.Mkdir(filepath.Join(root, "lost"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the failed watch", func() bool { return h.w.Stats().WatchErrors == 1 })
	h.write("lost/f.txt", "not seen: no watch")
	// A change written after it in a watched directory is seen: by then
	// any event of lost/f.txt (the kernel keeps their order) would be too.
	h.write("sentinel.txt", "seen")
	h.waitPaths(60*time.Second, "sentinel.txt")
	if h.seenPaths()["lost/f.txt"] != 0 {
		t.Fatal("lost/f.txt seen without a watch: the test does not test anything")
	}

	failLost.Delete("on")
	h.w.injectErr <- fsnotify.ErrEventOverflow
	h.waitPaths(60*time.Second, "lost/f.txt")
	var rescanned bool
	for _, s := range h.summaries() {
		rescanned = rescanned || s.Rescanned && slices.Contains(s.Paths, "lost/f.txt")
	}
	if !rescanned {
		t.Errorf("summary not marked Rescanned: %+v", h.summaries())
	}
	if h.seenPaths()["old/untouched.txt"] != 0 {
		t.Error("a file not modified since the last quiet moment was reported by the rescan")
	}
	if st := h.w.Stats(); st.Rescans != 1 {
		t.Errorf("Rescans = %d, want 1", st.Rescans)
	}
	if !strings.Contains(h.logs.String(), "overflow") {
		t.Errorf("no log line about the overflow:\n%s", h.logs)
	}
	// The rescan placed the missing watch.
	h.write("lost/g.txt", "seen")
	h.waitPaths(60*time.Second, "lost/g.txt")
}

func TestWatchLimitDegrades(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "early/deep1/f"), "x")
	h := start(t, root, Options{}, func(w *Watcher) {
		w.addHook = func(p string) error {
			if strings.Contains(p, "deep") {
				return syscall.ENOSPC
			}
			return nil
		}
	})
	if d := h.w.Degraded(); !strings.Contains(d, "fs.inotify.max_user_watches") {
		t.Errorf("Degraded() = %q, want it to name fs.inotify.max_user_watches", d)
	}
	// More failures later: still one log line.
	for i := range 5 {
		h.write(fmt.Sprintf("later/deep%d/f", i), "x")
	}
	h.write("fine/ok.txt", "still watching")
	h.waitPaths(60*time.Second, "fine/ok.txt")
	if n := strings.Count(h.logs.String(), "fs.inotify.max_user_watches=524288"); n != 1 {
		t.Errorf("%d log lines name fs.inotify.max_user_watches, want 1:\n%s", n, h.logs)
	}
	if !strings.Contains(h.logs.String(), "sysctl -w fs.inotify.max_user_watches=") {
		t.Errorf("the log line does not say how to raise the limit:\n%s", h.logs)
	}
	if st := h.w.Stats(); st.WatchErrors < 6 {
		t.Errorf("WatchErrors = %d, want >= 6", st.WatchErrors)
	}
}

func TestGitEvents(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/main\n")
	if err := os.MkdirAll(filepath.Join(root, ".git/refs/heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	calls := make(chan string, 100)
	h := start(t, root, Options{OnGitEvent: func(dir string) { calls <- dir }}, nil)
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("OnGitEvent(%q), want %q", got, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no OnGitEvent(%q)", want)
		}
	}
	noCall := func() {
		t.Helper()
		select {
		case got := <-calls:
			t.Fatalf("unexpected OnGitEvent(%q)", got)
		case <-time.After(2 * gitQuiet):
		}
	}
	// Objects and the index do not matter.
	h.write(".git/objects/ab/cdef", "blob")
	h.write(".git/index", "index")
	noCall()
	// A ref written git's way: lock file renamed over the ref.
	h.write(".git/refs/heads/main.lock", "0123456789012345678901234567890123456789\n")
	if err := os.Rename(filepath.Join(root, ".git/refs/heads/main.lock"), filepath.Join(root, ".git/refs/heads/main")); err != nil {
		t.Fatal(err)
	}
	expect(h.w.Root())
	// A branch with a slash: a new directory under refs/heads.
	h.write(".git/refs/heads/feature/x", "0123456789012345678901234567890123456789\n")
	expect(h.w.Root())
	h.write(".git/refs/heads/feature/y", "0123456789012345678901234567890123456789\n")
	expect(h.w.Root())
	h.write(".git/HEAD", "ref: refs/heads/feature/x\n")
	expect(h.w.Root())
	// A repository created after start (git init) is picked up.
	h.write("sub/.git/HEAD", "ref: refs/heads/main\n")
	if err := os.MkdirAll(filepath.Join(root, "sub/.git/refs/heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(filepath.Join(h.w.Root(), "sub"))
	h.write("sub/.git/refs/heads/main", "0123456789012345678901234567890123456789\n")
	expect(filepath.Join(h.w.Root(), "sub"))
	h.settle()
	for p := range h.seenPaths() {
		if strings.Contains(p, ".git") {
			t.Errorf("git internals reported as a work path: %q", p)
		}
	}
}

// TestBurst50000Writes: 2,000 files in 20 directories created during the
// burst, then written 24 more times each (open, write in place, close):
// 50,000 writes. The last write must be in a summary within Quiet + 1s of
// the burst's end, and the summaries are bounded by the debounce.
func TestBurst50000Writes(t *testing.T) {
	const dirs, files, rounds = 20, 100, 25
	root := t.TempDir()
	quiet := 500 * time.Millisecond
	h := start(t, root, Options{Quiet: quiet, MaxPaths: 20}, nil)
	data := []byte("some content\n")
	path := func(d, f int) string { return filepath.Join(root, fmt.Sprintf("d%02d/f%03d.txt", d, f)) }
	begin := time.Now()
	for r := range rounds {
		for d := range dirs {
			if r == 0 {
				if err := os.Mkdir(filepath.Dir(path(d, 0)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for f := range files {
				if r == 0 {
					if err := os.WriteFile(path(d, f), data, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				fh, err := os.OpenFile(path(d, f), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fh.WriteAt(data, 0); err != nil {
					t.Fatal(err)
				}
				if err := fh.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	end := time.Now()
	last := fmt.Sprintf("d%02d/f%03d.txt", dirs-1, files-1)
	deadline := time.After(quiet + time.Second)
	for got := false; !got; {
		select {
		case s := <-h.sums:
			got = slices.Contains(s.Paths, last)
		case <-deadline:
			t.Fatalf("the last write (%s) not reported within quiet+1s of the burst's end; summaries: %d, stats %+v",
				last, len(h.summaries()), h.w.Stats())
		}
	}
	took := time.Since(end)
	h.settle()
	sums := h.summaries()
	total := 0
	for _, s := range sums {
		total += s.Count
	}
	st := h.w.Stats()
	t.Logf("%d writes in %v; last write reported %v after the burst; %d summaries, %d paths; stats %+v",
		dirs*files*rounds, end.Sub(begin).Round(time.Millisecond), took.Round(time.Millisecond), len(sums), total, st)
	// Each summary but the last needs a quiet gap (or MaxWait) inside the
	// burst: far fewer than one per event even when the machine stalls.
	if limit := int(end.Sub(begin)/quiet) + 2; len(sums) > limit || len(sums) > 100 {
		t.Errorf("%d summaries for one burst, want <= min(%d, 100)", len(sums), limit)
	}
	if total < dirs*files {
		t.Errorf("summaries count %d distinct paths, want >= %d", total, dirs*files)
	}
}

func TestRunTwiceAndBadRoot(t *testing.T) {
	if _, err := New(Options{Root: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("New with a missing root: no error")
	}
	f := filepath.Join(t.TempDir(), "file")
	mustWrite(t, f, "x")
	if _, err := New(Options{Root: f}); err == nil {
		t.Error("New with a file as root: no error")
	}
	h := start(t, t.TempDir(), Options{}, nil)
	if err := h.w.Run(context.Background(), nil); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("second Run: %v, want an error", err)
	}
}

func TestPendingActivityFlushedOnStop(t *testing.T) {
	h := start(t, t.TempDir(), Options{Quiet: time.Minute}, nil)
	h.write("f.txt", "x")
	waitFor(t, 60*time.Second, "the change recorded", func() bool { return h.w.Stats().Changes > 0 })
	h.stop()
	select {
	case s := <-h.sums:
		if !slices.Contains(s.Paths, "f.txt") {
			t.Errorf("flushed summary %+v lacks f.txt", s)
		}
	default:
		t.Error("pending activity not flushed when Run stopped")
	}
}
