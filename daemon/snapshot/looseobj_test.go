package snapshot

import (
	"fmt"
	"path/filepath"
	"testing"
)

// A Take from what changed writes its blobs, trees and commit as one
// pack, put in place before its ref, and no loose object; one that finds
// nothing new (or fails) leaves no pack or temporary file behind. A Take
// after it reads the trees it wrote back from the pack.
func TestTakeFromChangedWritesOnePack(t *testing.T) {
	wd := t.TempDir()
	for i := range 4 {
		write(t, wd, fmt.Sprintf("d%d/sub/f.txt", i), "one\n")
	}
	s := newStore(t, wd, Options{})
	s.Follow()
	mustTake(t, s, "start", 1)
	objects := filepath.Join(s.Dir(), "objects")
	stored := func() (packs []string, loose []string) {
		t.Helper()
		packs, _ = filepath.Glob(filepath.Join(objects, "pack", "*"))
		loose, _ = filepath.Glob(filepath.Join(objects, "[0-9a-f][0-9a-f]", "*"))
		return packs, loose
	}
	packs0, loose0 := stored()

	write(t, wd, "d1/sub/f.txt", "two\n")
	write(t, wd, "d2/sub/new.txt", "new\n")
	s.NoteChanged([]string{"d1/sub/f.txt", "d2/sub/new.txt"})
	snap, isNew := mustTake(t, s, "quiet", 2)
	if !isNew || !snap.Took.Incremental {
		t.Fatalf("Take from what changed: new %v, incremental %v", isNew, snap.Took.Incremental)
	}
	packs, loose := stored()
	if len(loose) != len(loose0) || len(packs) != len(packs0)+2 {
		t.Fatalf("the Take wrote packs %v -> %v and loose objects %d -> %d; want one pack and its index, no loose object",
			packs0, packs, len(loose0), len(loose))
	}
	if files := treeOf(t, s, snap.ID); files["d1/sub/f.txt"].content != "two\n" || files["d2/sub/new.txt"].content != "new\n" {
		t.Fatalf("the snapshot holds %v", files)
	}

	s.NoteChanged([]string{"d1/sub/f.txt"}) // nothing new in it
	if _, isNew := mustTake(t, s, "quiet", 3); isNew {
		t.Fatal("a Take of an unchanged file made a snapshot")
	}
	if again, _ := stored(); len(again) != len(packs) {
		t.Fatalf("a Take that made no snapshot left files in objects/pack: %v -> %v", packs, again)
	}

	s.lock.Lock()
	s.take.Release() // the next Take reads the trees from the pack
	s.lock.Unlock()
	write(t, wd, "d1/sub/f.txt", "three\n")
	s.NoteChanged([]string{"d1/sub/f.txt"})
	snap, _ = mustTake(t, s, "quiet", 4)
	if files := treeOf(t, s, snap.ID); files["d1/sub/f.txt"].content != "three\n" || files["d2/sub/new.txt"].content != "new\n" {
		t.Fatalf("the snapshot after one read from the pack holds %v", files)
	}
}
