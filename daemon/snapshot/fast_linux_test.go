//go:build linux

package snapshot

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIncrementalNeverLeavesTheTree: told only of a file below a
// directory that has become a link out of the workdir, a snapshot from
// what changed does not follow the link (it adds the whole tree, which
// stores the link). (A named pipe where the walk saw a file never holds a
// Take either: take.TestStoreFileNeverWaitsOnAPipe.)
func TestIncrementalNeverLeavesTheTree(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	write(t, wd, "d/x", "inside\n")
	write(t, outside, "x", "outside the workdir\n")
	s := newStore(t, wd, Options{})
	s.Follow()
	mustTake(t, s, "start", 1)
	if err := os.RemoveAll(filepath.Join(wd, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "d")); err != nil {
		t.Fatal(err)
	}
	s.NoteChanged([]string{"d/x"})
	snap, _ := mustTake(t, s, "quiet", 2)
	files := treeOf(t, s, snap.ID)
	if f, ok := files["d"]; !ok || f.content != outside {
		t.Fatalf("the snapshot holds %v, want d as a link to %s", files, outside)
	}
	if _, ok := files["d/x"]; ok {
		t.Fatal("the snapshot followed a link out of the workdir")
	}

}
