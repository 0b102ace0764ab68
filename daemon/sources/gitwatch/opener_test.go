package gitwatch

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/safefile"
)

// recordingOpener opens as this process does, notes every path it is
// asked for, and refuses (EACCES) those under a denied directory, as the
// open of a user who may not read them would.
type recordingOpener struct {
	deny string // refused: this path and what lies below it

	mu    sync.Mutex
	asked []string
}

func (o *recordingOpener) Open(path string, opt safefile.OpenOptions) (*os.File, fs.FileInfo, error) {
	o.mu.Lock()
	o.asked = append(o.asked, path)
	o.mu.Unlock()
	if o.deny != "" && (path == o.deny || strings.HasPrefix(path, o.deny+"/")) {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	return safefile.Here.Open(path, opt)
}

func (o *recordingOpener) OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	return o.Open(filepath.Join(dir, name), safefile.OpenOptions{})
}

// TestReadsGoThroughTheOpener: the repository's files and its
// configuration (read for Refuses, on a git too old for
// GIT_NO_LAZY_FETCH) are opened through the Opener; a .git file leading
// to a git directory the Opener may not read opens no repository, so
// nothing of it is reported.
func TestReadsGoThroughTheOpener(t *testing.T) {
	old := *testGit(t)
	old.Version = gittool.Version{Major: 2, Minor: 43, Patch: 3}
	r := newRepo(t)
	r.commit("first")
	op := &recordingOpener{}
	g, err := OpenWith(r.dir, &old, op)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Check(); err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(r.dir)
	for _, want := range []string{"config", "HEAD", "refs/heads"} {
		if !slices.Contains(op.asked, filepath.Join(root, ".git", want)) {
			t.Errorf("the Opener was not asked for .git/%s: %q", want, op.asked)
		}
	}

	// A workdir whose .git file names the repository above, which the
	// Opener may not read (a root-only repository, read as its owner).
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".git"), []byte("gitdir: "+filepath.Join(root, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWith(work, &old, nil); err != nil {
		t.Fatalf("the control does not work: this process cannot open the repository: %v", err)
	}
	deny := &recordingOpener{deny: filepath.Join(root, ".git")}
	if g, err := OpenWith(work, &old, deny); err == nil {
		t.Errorf("a repository the Opener may not read was opened: %s", g.Root())
	} else if !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("the error does not say why: %v", err)
	}
}
