package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	v1, _ := mustTake(t, s, "start", 1)

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
	v1, _ := mustTake(t, s, "start", 1)
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
	v1, _ := mustTake(t, s, "start", 1)
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

// Where the snapshot has a symbolic link and the workdir now has a
// directory of snapshotted files, one restore removes the files and makes
// the link, and says so (no "left alone").
func TestRestoreLinkWhereADirectoryIs(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "target/a.txt", "a\n")
	if err := os.Symlink("target", filepath.Join(wd, "link")); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, wd, Options{})
	v1, _ := mustTake(t, s, "start", 1)
	if err := os.Remove(filepath.Join(wd, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, wd, "link/in.txt", "now a directory\n")
	mustTake(t, s, "quiet", 1)
	res, err := s.Restore(context.Background(), v1.ID, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(wd, "link")); err != nil || got != "target" {
		t.Fatalf("after one restore link is %q, %v (result %+v)", got, err, res)
	}
	if len(res.Refused) != 0 {
		t.Fatalf("refused = %+v, but the link was made", res.Refused)
	}
	want := []FileChange{{Path: "link", Status: StatusAdded, LinesAdded: 1}, {Path: "link/in.txt", Status: StatusDeleted, LinesDeleted: 1}}
	if !slices.Equal(res.Changes, want) {
		t.Fatalf("changes = %+v, want %+v", res.Changes, want)
	}
	// The undo brings the directory back.
	if _, err := s.Restore(context.Background(), res.Safety, nil, false); err != nil || read(t, wd, "link/in.txt") != "now a directory\n" {
		t.Fatalf("undo: %v", err)
	}
}

// A snapshot that writes ".gitignore = *" is undone whole by its safety
// snapshot: the files it wrote (ignored by the rule it wrote) are put back
// or removed, and the rule goes.
func TestRestoreOfIgnoreAllIsUndone(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "mine\n")
	write(t, wd, "b.txt", "mine b\n")
	s := newStore(t, wd, Options{})
	mustTake(t, s, "start", 1)
	before := fingerprint(t, wd)
	blob := func(c string) string { return writeObject(t, s, "blob", []byte(c)) }
	x := forgedSnapshot(t, s, rawTree(t, s,
		rawEntry{"100644", ".gitignore", blob("*\n")},
		rawEntry{"100644", "a.txt", blob("theirs\n")},
		rawEntry{"100644", "x-only.txt", blob("theirs only\n")}))
	res, err := s.Restore(context.Background(), x, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, wd, ".gitignore") != "*\n" || read(t, wd, "a.txt") != "theirs\n" {
		t.Fatalf("the restore of x did not write its files: %+v", res)
	}
	undo, err := s.Restore(context.Background(), res.Safety, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	after := fingerprint(t, wd)
	for k, v := range before { // modification times differ: compare contents
		if k == "." {
			continue
		}
		if w, ok := after[k]; !ok || v[strings.LastIndexByte(v, ' '):] != w[strings.LastIndexByte(w, ' '):] {
			t.Errorf("after the undo %s is %q, was %q", k, w, v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("after the undo %s is still there", k)
		}
	}
	if len(undo.Refused) != 0 {
		t.Errorf("the undo left alone %+v", undo.Refused)
	}
}
