package snapshot

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// copySnapshot brings snapshot id of from into to as another machine's
// fetch does: the objects streamed in, then Import.
func copySnapshot(t *testing.T, from, to *Store, id string) {
	t.Helper()
	ctx := context.Background()
	_, objs, err := from.Objects(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(objs))
	for i, o := range objs {
		ids[i] = o.ID
	}
	release := to.HoldObjects()
	defer release()
	err = from.ReadObjects(ctx, ids, func(o Object, data []byte) error {
		return to.ReceiveObject(ctx, o, int64(len(data)), bytes.NewReader(data))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.Import(ctx, id, id); err != nil {
		t.Fatal(err)
	}
}

// TestImportedSnapshotsAreUnderRetention: imported snapshots are kept by
// the same count as the store's own (the newest by time), so refs/imported
// does not grow for ever.
func TestImportedSnapshotsAreUnderRetention(t *testing.T) {
	ctx := context.Background()
	wa, wb := t.TempDir(), t.TempDir()
	a := newStore(t, wa, Options{})
	b := newStore(t, wb, Options{KeepCount: 2})
	var ids []string
	for i, content := range []string{"one\n", "two\n", "three\n"} {
		write(t, wa, "f.txt", content)
		snap, _ := mustTake(t, a, "quiet", uint64(i+1))
		ids = append(ids, snap.ID)
		copySnapshot(t, a, b, snap.ID)
	}
	write(t, wb, "own.txt", "b\n")
	mustTake(t, b, "quiet", 1)
	if _, err := b.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Show(ctx, ids[0]); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the oldest import after GC with keep 2: %v, want NOT_FOUND", err)
	}
	for _, id := range ids[1:] {
		if _, err := b.Show(ctx, id); err != nil {
			t.Errorf("a kept import: %v", err)
		}
	}
}

// TestGCHealsABrokenImport: a store holding an imported snapshot that
// names a missing object (as imports made before they were checked whole
// could) has its GC fail; GC drops that import, removes the temporary
// pack git left, and works.
func TestGCHealsABrokenImport(t *testing.T) {
	ctx := context.Background()
	w := t.TempDir()
	s := newStore(t, w, Options{})
	write(t, w, "own.txt", "mine\n")
	mustTake(t, s, "quiet", 1)
	tree, err := s.git.Run(ctx, repo.Call{Args: []string{"mktree", "--missing"},
		Stdin: strings.NewReader("100644 blob 0123456789012345678901234567890123456789\tlost.txt\n")})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := s.git.Run(ctx, repo.Call{Args: []string{"commit-tree", strings.TrimSpace(string(tree))},
		Stdin: strings.NewReader("continuityd-snapshot v=1 n=7 trigger=quiet seq=1 time=2026-11-30T10:00:00Z parent=- added=1 modified=0 deleted=0 skipped=0\n")})
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(commit))
	if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-ref", repo.ImportPrefix + id, id}}); err != nil {
		t.Fatal(err)
	}
	// The import path refuses it now.
	if _, err := s.Import(ctx, id, id); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Import of a commit that is not whole: %v, want ErrDamaged", err)
	}
	leftover := filepath.Join(s.Dir(), "objects", "pack", "tmp_pack_left")
	if err := os.WriteFile(leftover, []byte("half a pack"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx); err != nil {
		t.Fatalf("GC with a broken import: %v", err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary pack is still there: %v", err)
	}
	if _, err := s.Show(ctx, id); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the broken import after GC: %v, want NOT_FOUND", err)
	}
	if _, err := s.GC(ctx); err != nil {
		t.Fatalf("the next GC: %v", err)
	}
}

// TestReceiveObjectChecksSizeAndHash: a blob longer or shorter than
// declared, over MaxFileBytes, or misnamed is refused and not stored.
func TestReceiveObjectChecksSizeAndHash(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, t.TempDir(), Options{MaxFileBytes: 64})
	const id = "ce013625030ba8dba906f756967f9e9ca394464a" // "hello\n"
	for name, c := range map[string]struct {
		size int64
		body string
		want string
	}{
		"longer":   {size: 3, body: "hello\n", want: "more than 3"},
		"shorter":  {size: 9, body: "hello\n", want: "6 bytes, 9 were declared"},
		"too big":  {size: 65, body: strings.Repeat("x", 65), want: "max_file_size"},
		"misnamed": {size: 6, body: "jello\n", want: "hashes to"},
	} {
		err := s.ReceiveObject(ctx, Object{ID: id, Type: "blob"}, c.size, strings.NewReader(c.body))
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrDamaged saying %q", name, err, c.want)
		}
	}
	if miss, err := s.Missing(ctx, []string{id}); err != nil || len(miss) != 1 {
		t.Fatalf("a refused blob is in the store: %v %v", miss, err)
	}
	if err := s.ReceiveObject(ctx, Object{ID: id, Type: "blob"}, 6, strings.NewReader("hello\n")); err != nil {
		t.Fatal(err)
	}
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "blob", id}})
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("the received blob reads back as %q, %v", out, err)
	}
	if left, _ := os.ReadDir(filepath.Join(s.Dir(), repo.IncomingDir)); len(left) > 0 {
		t.Errorf("incoming/ keeps %d files", len(left))
	}
}

func isCode(err error, code string) bool {
	var ce *capsule.Error
	return errors.As(err, &ce) && ce.Code == code
}
