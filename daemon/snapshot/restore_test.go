package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// A restore of one path brings back that path only; the safety snapshot
// undoes it; a dry run lists what would change and changes nothing.
func TestRestoreOnePathAndUndo(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "a version 1\n")
	write(t, wd, "b.txt", "b version 1\n")
	s := newStore(t, wd, Options{})
	ctx := context.Background()
	v1, _ := take(t, s, "start", 1)

	write(t, wd, "a.txt", "a version 2\n")
	write(t, wd, "b.txt", "b version 2\n")
	write(t, wd, "c/new.txt", "new\n") // not taken yet: the safety snapshot must hold it

	// Dry run: lists, changes nothing, makes no snapshot.
	before := fingerprint(t, wd)
	dry, err := s.Restore(ctx, v1.ID, []string{"a.txt"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.Safety != "" || !slices.Equal(dry.Changes, []FileChange{{Path: "a.txt", Status: StatusModified, LinesAdded: 1, LinesDeleted: 1}}) {
		t.Fatalf("dry run = %+v", dry)
	}
	if d := diffFingerprints(before, fingerprint(t, wd)); d != "" {
		t.Fatalf("a dry run changed the workdir:\n%s", d)
	}
	if list, _ := s.List(ctx); len(list) != 1 {
		t.Fatalf("a dry run made a snapshot: %d listed", len(list))
	}

	res, err := s.Restore(ctx, v1.ID, []string{"a.txt"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, wd, "a.txt") != "a version 1\n" || read(t, wd, "b.txt") != "b version 2\n" || read(t, wd, "c/new.txt") != "new\n" {
		t.Fatalf("restore of a.txt: a=%q b=%q", read(t, wd, "a.txt"), read(t, wd, "b.txt"))
	}
	if !res.SafetyNew || res.Safety == "" || !slices.Equal(res.Changes, []FileChange{{Path: "a.txt", Status: StatusModified, LinesAdded: 1, LinesDeleted: 1}}) {
		t.Fatalf("restore = %+v", res)
	}
	list, _ := s.List(ctx)
	if len(list) != 2 || list[0].ID != res.Safety || list[0].Trigger != "restore" {
		t.Fatalf("the safety snapshot is not the newest: %+v", list)
	}

	// The safety snapshot undoes the restore.
	undo, err := s.Restore(ctx, res.Safety, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, wd, "a.txt") != "a version 2\n" || read(t, wd, "b.txt") != "b version 2\n" || read(t, wd, "c/new.txt") != "new\n" {
		t.Fatalf("undo: a=%q", read(t, wd, "a.txt"))
	}
	// Again, twice: the second time the tree is the newest snapshot's (the
	// first one's safety), so no new safety snapshot and nothing to change.
	first, err := s.Restore(ctx, res.Safety, nil, false)
	if err != nil || !first.SafetyNew || len(first.Changes) != 0 || undo.Safety == first.Safety {
		t.Fatalf("a restore onto the same tree = %+v, %v", first, err)
	}
	again, err := s.Restore(ctx, res.Safety, nil, false)
	if err != nil || again.SafetyNew || again.Safety != first.Safety || len(again.Changes) != 0 {
		t.Fatalf("a restore onto the same tree = %+v, %v", again, err)
	}

	// A whole restore removes files the snapshot does not hold, and the
	// directories they leave empty.
	all, err := s.Restore(ctx, v1.ID, []string{"."}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, "c")); !os.IsNotExist(err) {
		t.Fatalf("the whole restore left c/: %v (%+v)", err, all)
	}
	if read(t, wd, "b.txt") != "b version 1\n" {
		t.Fatal("the whole restore did not bring b.txt back")
	}
	if _, err := s.Restore(ctx, all.Safety, nil, false); err != nil || read(t, wd, "c/new.txt") != "new\n" {
		t.Fatalf("undo of the whole restore: %v", err)
	}
}

// Paths outside the workdir, in .git, or through a symbolic link are
// refused with the field named, and nothing changes.
func TestRestoreRefusesPathsOutside(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	write(t, wd, "a.txt", "1\n")
	write(t, outside, "victim.txt", "keep me\n")
	if err := os.Symlink(outside, filepath.Join(wd, "out")); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, wd, Options{})
	v1, _ := take(t, s, "start", 1)
	write(t, wd, "a.txt", "2\n")
	before, beforeOut := fingerprint(t, wd), fingerprint(t, outside)
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", filepath.Join(outside, "victim.txt"), ".git/config", "sub/.git/HEAD", "out/victim.txt", ""} {
		_, err := s.Restore(context.Background(), v1.ID, []string{"a.txt", p}, false)
		var ce *capsule.Error
		if !errors.As(err, &ce) || ce.Field != "paths[1]" || ce.Status != 400 {
			t.Errorf("restore of %q: %v, want a refusal of paths[1]", p, err)
		}
	}
	if d := diffFingerprints(before, fingerprint(t, wd)) + diffFingerprints(beforeOut, fingerprint(t, outside)); d != "" {
		t.Fatalf("a refused restore changed files:\n%s", d)
	}
	if list, _ := s.List(context.Background()); len(list) != 1 {
		t.Fatal("a refused restore made a safety snapshot")
	}
}

// A file no snapshot holds (ignored) that is in the way is not
// overwritten: the restore could not be undone.
func TestRestoreLeavesUnsnapshottedFiles(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "config.local", "old tracked\n")
	s := newStore(t, wd, Options{})
	v1, _ := take(t, s, "start", 1)
	write(t, wd, ".gitignore", "config.local\n")
	write(t, wd, "config.local", "precious, ignored now\n")
	res, err := s.Restore(context.Background(), v1.ID, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, wd, "config.local") != "precious, ignored now\n" {
		t.Fatal("the restore overwrote a file no snapshot holds")
	}
	if len(res.Refused) != 1 || res.Refused[0].Path != "config.local" {
		t.Fatalf("refused = %+v", res.Refused)
	}
	if _, err := os.Stat(filepath.Join(wd, ".gitignore")); !os.IsNotExist(err) {
		t.Fatal("the restore did not remove .gitignore, which v1 lacks")
	}
}
