package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// rawEntry is one entry of a tree object written byte by byte.
type rawEntry struct {
	mode, name, id string
}

// writeObject stores an object as given, unchecked (hash-object
// --literally): a forged snapshot as another machine could send it.
func writeObject(t *testing.T, s *Store, typ string, data []byte) string {
	t.Helper()
	out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"hash-object", "-t", typ, "-w", "--literally", "--stdin"}, Stdin: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func rawTree(t *testing.T, s *Store, entries ...rawEntry) string {
	t.Helper()
	slices.SortFunc(entries, func(a, b rawEntry) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	for _, e := range entries {
		id, err := hex.DecodeString(e.id)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\x00", e.mode, e.name)
		b.Write(id)
	}
	return writeObject(t, s, "tree", b.Bytes())
}

// forgedSnapshot makes a snapshot commit of tree and imports it, as the
// fleet fetch does.
func forgedSnapshot(t *testing.T, s *Store, tree string) string {
	t.Helper()
	msg := "continuityd-snapshot v=1 n=99 trigger=quiet seq=1 time=2026-11-30T10:00:00Z parent=- added=1 modified=0 deleted=0 skipped=0\n"
	commit := writeObject(t, s, "commit", fmt.Appendf(nil, "tree %s\nauthor x <x@x> 1 +0000\ncommitter x <x@x> 1 +0000\n\n%s", tree, msg))
	if _, err := s.Import(context.Background(), commit, commit); err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("Import: %v", err)
		}
		// Import refuses a snapshot that does not reach all its objects; a
		// store from before imports were checked whole may hold one all the
		// same, and the restore must refuse it too.
		if _, err := s.git.Run(context.Background(), repo.Call{Args: []string{"update-ref", repo.ImportPrefix + commit, commit}}); err != nil {
			t.Fatal(err)
		}
	}
	return commit
}

// A forged or damaged snapshot (from another machine) is refused whole by
// the dry run and the restore alike, with the same error, before anything
// in the workdir changes.
func TestRestoreRefusesForgedTrees(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "mine\n")
	write(t, wd, "dir/b.txt", "mine too\n")
	s := newStore(t, wd, Options{MaxFileBytes: 1000})
	mustTake(t, s, "start", 1)
	blob := writeObject(t, s, "blob", []byte("evil\n"))
	big := writeObject(t, s, "blob", bytes.Repeat([]byte("x"), 2000))
	ok := rawEntry{"100644", "ok.txt", blob}
	sub := func(entries ...rawEntry) string { return rawTree(t, s, entries...) }
	missing := strings.Repeat("ab", 20)
	cases := map[string]string{
		"..":             rawTree(t, s, ok, rawEntry{"40000", "..", sub(rawEntry{"100644", "evil", blob})}),
		".Git":           rawTree(t, s, ok, rawEntry{"40000", ".Git", sub(rawEntry{"40000", "hooks", sub(rawEntry{"100755", "x", blob})})}),
		".git.":          rawTree(t, s, ok, rawEntry{"100644", ".git.", blob}),
		"git~1":          rawTree(t, s, ok, rawEntry{"100644", "GIT~1", blob}),
		"absolute":       rawTree(t, s, ok, rawEntry{"100644", "/etc/evil", blob}),
		"empty name":     rawTree(t, s, ok, rawEntry{"40000", "", sub(rawEntry{"100644", "evil", blob})}),
		"slash in name":  rawTree(t, s, ok, rawEntry{"100644", "dir/b.txt", blob}),
		"missing blob":   rawTree(t, s, ok, rawEntry{"100644", "gone.txt", missing}),
		"missing tree":   rawTree(t, s, ok, rawEntry{"40000", "gone", missing}),
		"blob as tree":   rawTree(t, s, ok, rawEntry{"40000", "notatree", blob}),
		"bad mode":       rawTree(t, s, ok, rawEntry{"100600", "secret", blob}),
		"over the limit": rawTree(t, s, ok, rawEntry{"100644", "big.bin", big}),
		"long name":      rawTree(t, s, ok, rawEntry{"100644", strings.Repeat("n", 256), blob}),
	}
	ctx := context.Background()
	for name, tree := range cases {
		t.Run(name, func(t *testing.T) {
			id := forgedSnapshot(t, s, tree)
			before := fingerprint(t, wd)
			listed, _ := s.List(ctx)
			_, dryErr := s.Restore(ctx, id, nil, true)
			_, err := s.Restore(ctx, id, nil, false)
			var ce *capsule.Error
			if !errors.As(err, &ce) || ce.Field != "id" {
				t.Fatalf("restore: %v, want a refusal", err)
			}
			if dryErr == nil || dryErr.Error() != err.Error() {
				t.Fatalf("the dry run said %v, the restore %v", dryErr, err)
			}
			if d := diffFingerprints(before, fingerprint(t, wd)); d != "" {
				t.Fatalf("a refused restore changed the workdir (%v):\n%s", err, d)
			}
			if after, _ := s.List(ctx); len(after) != len(listed) {
				t.Fatalf("a refused restore made a safety snapshot")
			}
			t.Log(err)
		})
	}
}
