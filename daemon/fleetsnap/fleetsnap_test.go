package fleetsnap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	fleet "github.com/continuityd/continuityd/upstream/nats"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startFleet runs an embedded JetStream server and returns a client of it.
func startFleet(t *testing.T) *fleet.Client {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	c, err := fleet.New(fleet.Options{Name: "fleet", URLs: []string{s.ClientURL()}, Machine: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// machine is one machine's workdir and snapshot store.
type machine struct {
	work  string
	store *snapshot.Store
}

func newMachine(t *testing.T) machine {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := snapshot.Open(context.Background(), snapshot.Options{Dir: filepath.Join(root, "state", "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return machine{work: work, store: st}
}

func (m machine) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(m.work, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (m machine) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.work, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// counting is the bucket with its puts counted by name.
type counting struct {
	Bucket
	mu   sync.Mutex
	puts []string
}

func (c *counting) PutObject(ctx context.Context, name string, data []byte) error {
	c.mu.Lock()
	c.puts = append(c.puts, name)
	c.mu.Unlock()
	return c.Bucket.PutObject(ctx, name, data)
}

func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.puts
	c.puts = nil
	return p
}

// TestShipAndRestoreOnAnotherMachine: a snapshot taken on machine A and
// shipped is restored on machine B, whose store never had it; a second
// snapshot with one file changed sends that file's blob, the trees above
// it, its commit and its manifest, and nothing else.
func TestShipAndRestoreOnAnotherMachine(t *testing.T) {
	ctx := context.Background()
	c := startFleet(t)
	bucket := &counting{Bucket: c}
	a, b := newMachine(t), newMachine(t)

	a.write(t, "README.md", "hello\n")
	a.write(t, "src/main.go", "package main\n")
	a.write(t, "src/util/util.go", "package util\n")
	a.write(t, "docs/guide.md", "guide\n")
	s1, _, err := a.store.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	ship := NewShipper(a.store, bucket, "builder", "machine-a", nil)
	st, err := ship.Ship(ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	// commit, root tree, src, src/util, docs, four blobs; then the manifest.
	if st.Objects != 9 || st.Sent != 9 {
		t.Fatalf("first ship = %+v, want 9 objects all sent", st)
	}
	if puts := bucket.take(); len(puts) != 10 || puts[len(puts)-1] != "snap/builder/"+s1.ID {
		t.Fatalf("first ship put %d objects (%q), want 9 and the manifest last", len(puts), puts)
	}

	// Machine B: the snapshot is unknown until fetched.
	if _, err := b.store.Restore(ctx, s1.ID[:12], nil, false); !isCode(err, capsule.CodeNotFound) {
		t.Fatalf("restore before the fetch: %v, want NOT_FOUND", err)
	}
	got, err := Fetch(ctx, b.store, bucket, "builder", s1.ID[:12])
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s1.ID || got.Trigger != "quiet" {
		t.Fatalf("fetched %+v, want %s", got, s1.ID)
	}
	res, err := b.store.Restore(ctx, s1.ID[:12], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 4 {
		t.Errorf("restore on B changed %d files, want 4: %+v", len(res.Changes), res.Changes)
	}
	for rel, want := range map[string]string{"README.md": "hello\n", "src/main.go": "package main\n",
		"src/util/util.go": "package util\n", "docs/guide.md": "guide\n"} {
		if got := b.read(t, rel); got != want {
			t.Errorf("%s on B = %q, want %q", rel, got, want)
		}
	}
	// B's own numbering is untouched: the imported snapshot is not its newest.
	if n, ok := b.store.Newest(); ok && n.ID == s1.ID {
		t.Errorf("the imported snapshot became B's newest")
	}

	// One file changed: its blob, the trees src/util, src and the root,
	// the commit and the manifest go; the three unchanged blobs and docs/ do not.
	a.write(t, "src/util/util.go", "package util\n\nfunc X() {}\n")
	s2, _, err := a.store.Take(ctx, "quiet", 2)
	if err != nil {
		t.Fatal(err)
	}
	st, err = ship.Ship(ctx, s2.ID)
	if err != nil {
		t.Fatal(err)
	}
	puts := bucket.take()
	if st.Sent != 5 || len(puts) != 6 {
		t.Fatalf("second ship sent %d objects (%q), want 5 and the manifest", st.Sent, puts)
	}
	// A new shipper (a restarted daemon) asks the bucket rather than
	// resending: a snapshot shipped before costs nothing, and the next one
	// sends only what changed.
	fresh := NewShipper(a.store, bucket, "builder", "machine-a", nil)
	st, err = fresh.Ship(ctx, s2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if puts := bucket.take(); !st.Already || len(puts) != 0 {
		t.Fatalf("a fresh shipper of a shipped snapshot: %+v, put %q; want nothing", st, puts)
	}
	a.write(t, "docs/guide.md", "guide, longer\n")
	s3, _, err := a.store.Take(ctx, "quiet", 3)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = NewShipper(a.store, bucket, "builder", "machine-a", nil).Ship(ctx, s3.ID); err != nil {
		t.Fatal(err)
	}
	// docs/guide.md, docs/, the root tree and the commit (each looked up,
	// the rest found in the bucket), then the manifest.
	if puts := bucket.take(); st.Sent != 4 || len(puts) != 5 {
		t.Fatalf("a fresh shipper of a new snapshot sent %d (%q), want 4 and the manifest", st.Sent, puts)
	}

	// B fetches the second: only the changed objects are read, and the
	// file comes back.
	if _, err := Fetch(ctx, b.store, bucket, "builder", s2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Restore(ctx, s2.ID, []string{"src"}, false); err != nil {
		t.Fatal(err)
	}
	if got := b.read(t, "src/util/util.go"); got != "package util\n\nfunc X() {}\n" {
		t.Errorf("util.go on B = %q", got)
	}

	// Unknown ids and other agents' snapshots are NOT_FOUND.
	if _, err := Fetch(ctx, b.store, bucket, "builder", "0123456789ab"); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("unknown id: %v, want NOT_FOUND", err)
	}
	if _, err := Fetch(ctx, b.store, bucket, "other", s1.ID); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("another agent's snapshot: %v, want NOT_FOUND", err)
	}
}

// TestFetchRefusesAForgedObject: an object whose content does not hash to
// its name is refused, and the snapshot is not imported.
func TestFetchRefusesAForgedObject(t *testing.T) {
	ctx := context.Background()
	c := startFleet(t)
	a, b := newMachine(t), newMachine(t)
	a.write(t, "a.txt", "the real content\n")
	s1, _, err := a.store.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewShipper(a.store, c, "builder", "a", nil).Ship(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	_, objs, err := a.store.Objects(ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	blob := objs[len(objs)-1]
	if err := c.PutObject(ctx, "git/"+blob.ID, []byte("forged\n")); err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(ctx, b.store, c, "builder", s1.ID)
	if err == nil || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("fetch of a forged blob: %v, want a hash mismatch", err)
	}
	if _, err := b.store.Restore(ctx, s1.ID, nil, true); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the snapshot was imported anyway: %v", err)
	}
}

func isCode(err error, code string) bool {
	var ce *capsule.Error
	return errors.As(err, &ce) && ce.Code == code
}
