package journal

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/gittool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journalRig is a journal on a fresh store and work tree.
type journalRig struct {
	t    *testing.T
	j    *Journal
	repo *repo.Repo
	work string
}

func newRig(t *testing.T, o Options) *journalRig {
	t.Helper()
	ctx := context.Background()
	work := t.TempDir()
	tool, err := gittool.Find(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	r, err := repo.Open(ctx, filepath.Join(t.TempDir(), "snapshots.git"), work, tool, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := workdir.Open(work)
	if err != nil {
		t.Fatal(err)
	}
	o.Repo, o.Workdir, o.Log = r, wd, log
	j, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &journalRig{t: t, j: j, repo: r, work: work}
}

// settle writes content to the work tree's file name (removes it when
// content is nil), tells the journal it settled and waits until that is
// durable.
func (r *journalRig) settle(name string, content []byte) {
	r.t.Helper()
	p := filepath.Join(r.work, name)
	if content == nil {
		if err := os.Remove(p); err != nil {
			r.t.Fatal(err)
		}
	} else if err := os.WriteFile(p, content, 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.j.Settled(name, time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.j.Sync(ctx); err != nil {
		r.t.Fatalf("sync after %s settled: %v", name, err)
	}
}

func (r *journalRig) history(name string) []Entry {
	r.t.Helper()
	h, err := r.j.History(name)
	if err != nil || h.Damaged != 0 {
		r.t.Fatalf("history of %s: %+v %v", name, h, err)
	}
	return h.Versions
}

// A file written back and forth keeps each version, each content stored
// once; the same bytes written again are no new version; a deletion is a
// version that holds nothing; a file the journal never held going away is
// none.
func TestVersionsAreKeptByContent(t *testing.T) {
	r := newRig(t, Options{})
	r.settle("a.txt", []byte("one\n"))
	r.settle("a.txt", []byte("two\n"))
	r.settle("a.txt", []byte("one\n"))
	r.settle("a.txt", []byte("one\n")) // the same bytes again
	r.settle("a.txt", nil)
	os.WriteFile(filepath.Join(r.work, "brief.txt"), []byte("x"), 0o644)
	os.Remove(filepath.Join(r.work, "brief.txt"))
	r.settle("never.txt", []byte("y"))
	r.settle("never.txt", nil)
	r.j.Settled("brief.txt", time.Now()) // gone before it was read
	if err := r.j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}

	vs := r.history("a.txt")
	if len(vs) != 4 {
		t.Fatalf("%d versions of a.txt, want 4 (one, two, one, gone): %+v", len(vs), vs)
	}
	if vs[0].Blob != vs[2].Blob || vs[0].Blob == vs[1].Blob || !vs[0].Kept() || vs[0].Size != 4 || vs[0].Lines != 1 {
		t.Errorf("the versions' blobs: %x %x %x, want the first and third the same", vs[0].Blob, vs[1].Blob, vs[2].Blob)
	}
	if vs[3].Flags != FlagGone || vs[3].Kept() || vs[3].Blob != ([20]byte{}) {
		t.Errorf("the deletion: %+v, want a version that holds nothing", vs[3])
	}
	for i := 1; i < len(vs); i++ {
		if vs[i].Seq <= vs[i-1].Seq || vs[i].At.Before(vs[i-1].At) {
			t.Errorf("versions out of order: %+v then %+v", vs[i-1], vs[i])
		}
	}
	typ, data, ok, err := r.repo.ReadLoose(repo.OID(vs[0].Blob))
	if err != nil || !ok || typ != "blob" || string(data) != "one\n" {
		t.Errorf("the first version's blob: %q %q %v %v", typ, data, ok, err)
	}
	refs := map[[20]byte]uint32{}
	r.j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			var id [20]byte
			copy(id[:], k)
			_, refs[id] = readBlobVal(v)
			return nil
		})
	})
	if refs[vs[0].Blob] != 2 || refs[vs[1].Blob] != 1 {
		t.Errorf("blob references: %v, want the first content held by 2 versions and the second by 1", refs)
	}
	if vs := r.history("brief.txt"); len(vs) != 0 {
		t.Errorf("a file that went before it was read: %+v", vs)
	}
	if vs := r.history("never.txt"); len(vs) != 2 {
		t.Errorf("never.txt: %+v, want its version and its deletion", vs)
	}
	if n, err := r.j.Count(); err != nil || n != 6 {
		t.Errorf("count %d %v, want 6", n, err)
	}
	if p := r.j.Problem(); p != "" {
		t.Errorf("problem: %q", p)
	}
}

// A file over MaxFileBytes is a version that says so and holds nothing.
func TestLargeFileIsNotedNotKept(t *testing.T) {
	r := newRig(t, Options{MaxFileBytes: 4})
	r.settle("big.bin", []byte("0123456789"))
	vs := r.history("big.bin")
	if len(vs) != 1 || vs[0].Flags != FlagTooLarge || vs[0].Kept() || vs[0].Blob != ([20]byte{}) || vs[0].Size != 10 {
		t.Fatalf("the large file's versions: %+v", vs)
	}
	r.j.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketBlobs).Stats().KeyN; n != 0 {
			t.Errorf("%d blobs held for a file not kept", n)
		}
		return nil
	})
}

// An entry checks: what encode wrote decodes to the same entry, and a byte
// changed anywhere is damage, never a version.
func TestEntryDecodeChecks(t *testing.T) {
	e := Entry{Seq: 7, Path: "src/a.go", At: time.Unix(1_765_000_000, 123).UTC(), Blob: [20]byte{1, 2, 3},
		Mode: 0o100644, Size: 42, Lines: 3, By: "builder", Session: "s1", Turn: time.Unix(1_764_999_000, 0).UTC()}
	raw := e.encode()
	got, err := decodeEntry(7, raw)
	if err != nil || got.Path != e.Path || !got.At.Equal(e.At) || got.Blob != e.Blob || got.Mode != e.Mode ||
		got.Size != e.Size || got.Lines != e.Lines || got.By != e.By || got.Session != e.Session || !got.Turn.Equal(e.Turn) || got.Seq != 7 {
		t.Fatalf("decoded %+v %v, want %+v", got, err, e)
	}
	for i := range raw {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x40
		if _, err := decodeEntry(7, bad); err == nil {
			t.Fatalf("a byte changed at %d of %d decoded as a version", i, len(raw))
		}
	}
	if _, err := decodeEntry(7, raw[:len(raw)-1]); err == nil {
		t.Fatal("a cut entry decoded as a version")
	}
}
