package watch

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/safefile"
)

// recordingOpener opens as this process does, notes every path it is
// asked for, and refuses those in deny as the owner's open of a file they
// may not read would (EACCES): the Watcher's stand-in for a daemon
// reading as the tree's owner.
type recordingOpener struct {
	deny map[string]bool

	mu    sync.Mutex
	asked []string
}

func (o *recordingOpener) note(path string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, path)
	if o.deny[path] {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	return nil
}

func (o *recordingOpener) Open(path string, opt safefile.OpenOptions) (*os.File, fs.FileInfo, error) {
	if err := o.note(path); err != nil {
		return nil, nil, err
	}
	return safefile.Here.Open(path, opt)
}

func (o *recordingOpener) OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	if err := o.note(filepath.Join(dir, name)); err != nil {
		return nil, nil, err
	}
	return safefile.Here.OpenIn(dir, name)
}

func (o *recordingOpener) paths() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.asked)
}

// TestContentReadsGoThroughTheOpener: every ignore file and git file the
// Watcher reads is asked of Options.Opener, and one it refuses counts as
// git counts a .gitignore its user cannot read: its patterns do not
// apply, a warning names it once, and nothing of its content is logged.
// A .git file whose git directory the Opener may not read is not
// followed: no OnGitEvent for that repository.
func TestContentReadsGoThroughTheOpener(t *testing.T) {
	top := t.TempDir()
	if r, err := filepath.EvalSymlinks(top); err == nil {
		top = r
	}
	root := filepath.Join(top, "work")
	const hidden = "HIDDEN_PATTERN_q9*"
	mustWrite(t, filepath.Join(root, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(root, ".git/info/exclude"), "*.excluded\n")
	mustWrite(t, filepath.Join(root, "sub/.gitignore"), hidden+"\nsecret.txt\n")
	// A linked worktree whose git directory the owner may read, and a
	// submodule-like .git file leading to one the owner may not.
	readable, private := filepath.Join(top, "common/worktrees/wt"), filepath.Join(top, "private")
	mustWrite(t, filepath.Join(readable, "HEAD"), "ref: refs/heads/wt\n")
	mustWrite(t, filepath.Join(readable, "commondir"), "../..\n")
	mustWrite(t, filepath.Join(top, "common/HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(private, "HEAD"), "ref: refs/heads/main\n")
	for _, d := range []string{filepath.Join(top, "common/refs/heads"), filepath.Join(private, "refs/heads")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(root, "wt/.git"), "gitdir: "+readable+"\n")
	mustWrite(t, filepath.Join(root, "mod/.git"), "gitdir: "+private+"\n")

	op := &recordingOpener{deny: map[string]bool{
		filepath.Join(root, "sub/.gitignore"): true,
		filepath.Join(private, "commondir"):   true,
	}}
	calls := make(chan string, 100)
	h := start(t, root, Options{Opener: op, OnGitEvent: func(dir string) { calls <- dir }}, nil)

	asked := op.paths()
	for _, want := range []string{
		filepath.Join(root, ".gitignore"), filepath.Join(root, ".git/info/exclude"),
		filepath.Join(root, "sub/.gitignore"),
		filepath.Join(root, "wt/.git"), filepath.Join(readable, "commondir"),
		filepath.Join(root, "mod/.git"), filepath.Join(private, "commondir"),
	} {
		if !slices.Contains(asked, want) {
			t.Errorf("the Opener was not asked for %s; it was asked for %q", want, asked)
		}
	}

	// The refused .gitignore's patterns do not apply; the others do.
	h.write("sub/secret.txt", "reported: the pattern naming it could not be read")
	h.write("sub/HIDDEN_PATTERN_q9x", "reported too")
	h.write("sub/a.log", "ignored by the root's .gitignore")
	h.write("b.excluded", "ignored by .git/info/exclude")
	h.write("c.txt", "reported")
	h.waitPaths(60*time.Second, "sub/secret.txt", "sub/HIDDEN_PATTERN_q9x", "c.txt")
	h.settle()
	for p := range h.seenPaths() {
		if p == "sub/a.log" || p == "b.excluded" {
			t.Errorf("an ignored path was reported: %s", p)
		}
	}
	// A change of the refused file reads it again through the Opener.
	before := len(op.paths())
	h.write("sub/.gitignore", hidden+"\nsecret.txt\nother\n")
	waitFor(t, 60*time.Second, "the changed .gitignore asked of the Opener", func() bool {
		return slices.Contains(op.paths()[before:], filepath.Join(root, "sub/.gitignore"))
	})
	h.reset()
	h.write("sub/secret.txt", "reported once more")
	h.waitPaths(60*time.Second, "sub/secret.txt")

	logs := h.logs.String()
	if n := strings.Count(logs, "an ignore file cannot be read"); n != 1 {
		t.Errorf("the unreadable .gitignore was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, filepath.Join(root, "sub/.gitignore")) {
		t.Errorf("the log does not name the unreadable .gitignore:\n%s", logs)
	}
	if strings.Contains(logs, "HIDDEN_PATTERN") {
		t.Errorf("the log holds the unreadable file's content:\n%s", logs)
	}

	// The readable linked worktree's git directory is watched; the one
	// the Opener refused is not.
	mustWrite(t, filepath.Join(private, "HEAD"), "ref: refs/heads/other\n")
	for range 2 { // the second round comes after anything the first could have raised
		mustWrite(t, filepath.Join(readable, "HEAD"), "ref: refs/heads/wt2\n")
		select {
		case got := <-calls:
			if got != filepath.Join(root, "wt") {
				t.Fatalf("OnGitEvent(%q), want only the readable worktree's", got)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no OnGitEvent for the readable linked worktree")
		}
	}
	h.stop()
	select {
	case got := <-calls:
		t.Errorf("OnGitEvent(%q) after the rounds", got)
	default:
	}
}

// TestOuterRulesGoThroughTheOpener: a Root inside a repository reads the
// .gitignore files above it through the Opener too.
func TestOuterRulesGoThroughTheOpener(t *testing.T) {
	repo := t.TempDir()
	if r, err := filepath.EvalSymlinks(repo); err == nil {
		repo = r
	}
	mustWrite(t, filepath.Join(repo, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(repo, "svc/.gitignore"), "*.gen\n")
	mustWrite(t, filepath.Join(repo, ".git/HEAD"), "ref: refs/heads/main\n")
	root := filepath.Join(repo, "svc/api")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	op := &recordingOpener{deny: map[string]bool{filepath.Join(repo, "svc/.gitignore"): true}}
	h := start(t, root, Options{Opener: op}, nil)
	for _, want := range []string{filepath.Join(repo, ".gitignore"), filepath.Join(repo, "svc/.gitignore")} {
		if !slices.Contains(op.paths(), want) {
			t.Errorf("the Opener was not asked for %s: %q", want, op.paths())
		}
	}
	h.write("a.log", "ignored by the repository root's .gitignore")
	h.write("b.gen", "reported: svc/.gitignore could not be read")
	h.waitPaths(60*time.Second, "b.gen")
	h.settle()
	if h.seenPaths()["a.log"] != 0 {
		t.Error("a.log was reported: the repository root's .gitignore did not apply")
	}
}

// TestSharedSeparatesOpeners: subscribers reading a tree with different
// rights do not share a Watcher; with the same, they do.
func TestSharedSeparatesOpeners(t *testing.T) {
	root := t.TempDir()
	a, b := &recordingOpener{}, &recordingOpener{}
	var s Shared
	x, err := s.Subscribe(Options{Root: root, Opener: a}, Subscriber{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := s.Subscribe(Options{Root: root, Opener: a}, Subscriber{})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	z, err := s.Subscribe(Options{Root: root, Opener: b}, Subscriber{})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if x.Watcher() != y.Watcher() {
		t.Error("two subscribers with the same Opener got two Watchers")
	}
	if z.Watcher() == x.Watcher() {
		t.Error("a subscriber with another Opener joined a Watcher reading with other rights")
	}
}
