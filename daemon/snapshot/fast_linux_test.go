//go:build linux

package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestIncrementalNeverLeavesTheTree: told only of a file below a
// directory that has become a link out of the workdir, a snapshot from
// what changed does not follow the link (it adds the whole tree, which
// stores the link); and a named pipe where the walk saw a file never
// holds a Take.
func TestIncrementalNeverLeavesTheTree(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	write(t, wd, "d/x", "inside\n")
	write(t, outside, "x", "outside the workdir\n")
	s := newStore(t, wd, Options{})
	s.Follow()
	take(t, s, "start", 1)
	if err := os.RemoveAll(filepath.Join(wd, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "d")); err != nil {
		t.Fatal(err)
	}
	s.NoteChanged([]string{"d/x"})
	snap, _ := take(t, s, "quiet", 2)
	files := treeOf(t, s, snap.ID)
	if f, ok := files["d"]; !ok || f.content != outside {
		t.Fatalf("the snapshot holds %v, want d as a link to %s", files, outside)
	}
	if _, ok := files["d/x"]; ok {
		t.Fatal("the snapshot followed a link out of the workdir")
	}

	fifo := filepath.Join(wd, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.storeFile(seenFile{path: "pipe", mode: 0o644})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a named pipe read as a file: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reading a named pipe where a file was held the Take")
	}
}
