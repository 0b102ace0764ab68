package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// A restore limited to paths brings back a file of any name: a line
// break, a carriage return, a tab, quotes, a backslash, bytes that are not
// UTF-8, a leading "-".
func TestRestorePathsOfAnyName(t *testing.T) {
	names := []string{"line\nbreak.txt", "cr\rname.txt", "tab\tname.txt", `quo"te's.txt`, `back\slash.txt`,
		"bad\xff\xfeutf8.txt", "-leading.txt", "$(touch marker).txt", "back`tick`.txt", "dir\nwith break/in.txt"}
	wd := t.TempDir()
	for _, n := range names {
		write(t, wd, n, "kept "+n)
	}
	s := newStore(t, wd, Options{})
	v1, _ := mustTake(t, s, "start", 1)
	for _, n := range names {
		if err := os.Remove(filepath.Join(wd, n)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Restore(context.Background(), v1.ID, names, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != len(names) {
		t.Errorf("restore: %+v", res.Changes)
	}
	for _, n := range names {
		if got := read(t, wd, n); got != "kept "+n {
			t.Errorf("%q: %q", n, got)
		}
	}
}

// A path that names nothing, in the snapshot or in the tree, is refused
// (NOT_FOUND, the field named) rather than restored as "nothing to
// change"; a path held as it is, and one that only the tree holds (the
// restore removes it), are not.
func TestRestoreRefusesAnUnknownPath(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "1\n")
	write(t, wd, "dir/b.txt", "b\n")
	s := newStore(t, wd, Options{})
	ctx := context.Background()
	v1, _ := mustTake(t, s, "start", 1)
	write(t, wd, "a.txt", "2\n")
	write(t, wd, "new.txt", "new\n")
	before := fingerprint(t, wd)
	for _, p := range []string{"missing.txt", "dir/missing.txt", "di", "bad\xff.txt"} {
		_, err := s.Restore(ctx, v1.ID, []string{"a.txt", p}, false)
		var ce *capsule.Error
		if !errors.As(err, &ce) || ce.Code != capsule.CodeNotFound || ce.Field != "paths[1]" {
			t.Errorf("restore of %q: %v, want NOT_FOUND for paths[1]", p, err)
			continue
		}
		if strings.ContainsRune(ce.Message, 0xff) || !strings.Contains(ce.Message, repo.Short(v1.ID)) {
			t.Errorf("restore of %q: the message does not name it escaped and the snapshot: %s", p, ce.Message)
		}
		if _, err := s.Restore(ctx, v1.ID, []string{p}, true); err == nil {
			t.Errorf("a dry run of %q: no refusal", p)
		}
	}
	if d := diffFingerprints(before, fingerprint(t, wd)); d != "" {
		t.Fatalf("a refused restore changed files:\n%s", d)
	}
	for _, p := range []string{"dir", "dir/b.txt", "new.txt", "./dir/"} {
		if _, err := s.Restore(ctx, v1.ID, []string{p}, true); err != nil {
			t.Errorf("restore of %q: %v", p, err)
		}
	}
	res, err := s.Restore(ctx, v1.ID, []string{"new.txt"}, false)
	if err != nil || len(res.Changes) != 1 || res.Changes[0].Status != StatusDeleted {
		t.Errorf("restore of a path only the tree holds: %+v, %v", res, err)
	}
}
