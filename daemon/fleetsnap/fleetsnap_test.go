package fleetsnap

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
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

func newMachine(t *testing.T) machine { t.Helper(); return newMachineWith(t, snapshot.Options{}) }

// newMachineWith is newMachine with the store's options (Dir and Workdir
// are set here).
func newMachineWith(t *testing.T, opt snapshot.Options) machine {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	opt.Dir, opt.Workdir = filepath.Join(root, "state", "snapshots.git"), work
	st, err := snapshot.Open(context.Background(), opt)
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
	ship := NewShipper(a.store, bucket, withholder(t), "builder", "machine-a", nil)
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
	fresh := NewShipper(a.store, bucket, withholder(t), "builder", "machine-a", nil)
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
	if st, err = NewShipper(a.store, bucket, withholder(t), "builder", "machine-a", nil).Ship(ctx, s3.ID); err != nil {
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
	if _, err := NewShipper(a.store, c, withholder(t), "builder", "a", nil).Ship(ctx, s1.ID); err != nil {
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
	if !isCode(err, capsule.CodeFleetSnapshotDamaged) || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("fetch of a forged blob: %v, want FLEET_SNAPSHOT_DAMAGED naming a hash mismatch", err)
	}
	if _, err := b.store.Restore(ctx, s1.ID, nil, true); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the snapshot was imported anyway: %v", err)
	}
}

func isCode(err error, code string) bool {
	var ce *capsule.Error
	return errors.As(err, &ce) && ce.Code == code
}

// shipAllBut puts snapshot id's objects into the bucket, all but those
// named in leave out, and a manifest that lists all but those too: the
// forged shipment of a fleet member.
func shipAllBut(t *testing.T, c *fleet.Client, m machine, id string, leaveOut map[string]bool) {
	t.Helper()
	ctx := context.Background()
	snap, objs, err := m.store.Objects(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var listed []snapshot.Object
	var ids []string
	for _, o := range objs {
		if !leaveOut[o.ID] {
			listed = append(listed, o)
			ids = append(ids, o.ID)
		}
	}
	err = m.store.ReadObjects(ctx, ids, func(o snapshot.Object, data []byte) error {
		return c.PutObject(ctx, "git/"+o.ID, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(Manifest{V: 1, Agent: "builder", Machine: "forger", ID: snap.ID, Tree: objs[1].ID, At: snap.Time,
		Trigger: snap.Trigger, Seq: snap.Seq, Objects: listed, Uploaded: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutObject(ctx, "snap/builder/"+snap.ID, doc); err != nil {
		t.Fatal(err)
	}
}

// TestFetchRefusesASnapshotThatIsNotWhole: a manifest that neither lists
// nor ships one of the snapshot's blobs is refused as damaged before any
// ref is made, and the receiving store's GC keeps working (an imported
// snapshot with a missing object made every git gc fail for good).
func TestFetchRefusesASnapshotThatIsNotWhole(t *testing.T) {
	ctx := context.Background()
	c := startFleet(t)
	a, b := newMachine(t), newMachine(t)
	a.write(t, "kept.txt", "shipped\n")
	a.write(t, "lost.txt", "never shipped nor listed\n")
	s1, _, err := a.store.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, objs, err := a.store.Objects(ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	var lost string
	err = a.store.ReadObjects(ctx, []string{objs[2].ID, objs[3].ID}, func(o snapshot.Object, data []byte) error {
		if string(data) == "never shipped nor listed\n" {
			lost = o.ID
		}
		return nil
	})
	if err != nil || lost == "" {
		t.Fatalf("finding the blob to leave out: %v %q", err, lost)
	}
	shipAllBut(t, c, a, s1.ID, map[string]bool{lost: true})

	b.write(t, "own.txt", "b's own work\n")
	if _, _, err := b.store.Take(ctx, "quiet", 1); err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(ctx, b.store, c, "builder", s1.ID)
	if !isCode(err, capsule.CodeFleetSnapshotDamaged) || !strings.Contains(err.Error(), "not whole") {
		t.Fatalf("fetch of a snapshot with an unlisted, unshipped blob: %v, want FLEET_SNAPSHOT_DAMAGED (not whole)", err)
	}
	if _, err := b.store.Restore(ctx, s1.ID, nil, true); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the snapshot was imported anyway: %v", err)
	}
	for i := range 2 {
		if _, err := b.store.GC(ctx); err != nil {
			t.Fatalf("gc %d after the refused import: %v", i, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(b.store.Dir(), "objects", "pack", "tmp_*")); len(left) > 0 {
		t.Errorf("gc left temporary packs: %q", left)
	}
}

// TestFetchRefusesABlobOverMaxFileSize: the receiving store's
// max_file_size applies to what the fleet sends; the refusal comes before
// the object is read whole.
func TestFetchRefusesABlobOverMaxFileSize(t *testing.T) {
	ctx := context.Background()
	c := startFleet(t)
	a := newMachine(t)
	b := newMachineWith(t, snapshot.Options{MaxFileBytes: 4 << 10})
	a.write(t, "small.txt", "fits\n")
	a.write(t, "big.bin", strings.Repeat("0123456789abcdef", 1<<10)) // 16 KiB
	s1, _, err := a.store.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewShipper(a.store, c, withholder(t), "builder", "a", nil).Ship(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(ctx, b.store, c, "builder", s1.ID)
	if !isCode(err, capsule.CodeFleetSnapshotDamaged) || !strings.Contains(err.Error(), "max_file_size") {
		t.Fatalf("fetch of a 16 KiB blob into a store that takes 4 KiB: %v, want FLEET_SNAPSHOT_DAMAGED naming max_file_size", err)
	}
	if _, err := b.store.Restore(ctx, s1.ID, nil, true); !isCode(err, capsule.CodeNotFound) {
		t.Errorf("the snapshot was imported anyway: %v", err)
	}
}

// withholder is the daemon's Withholder: the built-in rules and the
// secret guard.
func withholder(t *testing.T, patterns ...string) *Withholder {
	t.Helper()
	g, err := guard.New(guard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWithholder(patterns, g)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Credentials of the tests: realistic in shape, valid nowhere.
const (
	testAWSKey     = "AKIAZ7VRSQ5TJDNWXB3K"
	testAWSSecret  = "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"
	testGitHubPAT  = "ghp_R8sWq2Lk5ZpT9vXy3NbC7dHf1JmQ4aEu6GoI"
	testPrivateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDx2yQk3n8nL0rU5c6vX0aZbYq1hJm9kT4pW7sE2fG3dAAAAJg=\n-----END OPENSSH PRIVATE KEY-----\n"
)

// TestShipWithholdsCredentials: a snapshot with an .env, an SSH private
// key, a .pem with a private key block, an .npmrc with a token, a file
// matching fleet_withhold and a source file holding a token ships without
// them (no object in the bucket holds their content, no tree names them),
// while ordinary files ship; the manifest names each with the reason; the
// local snapshot stays whole; and a restore on another machine leaves
// that machine's own copies untouched and says so.
func TestShipWithholdsCredentials(t *testing.T) {
	ctx := context.Background()
	c := startFleet(t)
	a, b := newMachine(t), newMachine(t)
	ordinary := map[string]string{
		"main.go":              "package main // ordinary\n",
		"notes/plan.md":        "step 1: ordinary notes\n",
		".ssh/id_ed25519.pub":  "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPublicHalf ordinary@host\n",
		".npmrc.example":       "registry=https://registry.npmjs.org/\n",
		"config/settings.json": `{"name": "ordinary", "port": 8080}` + "\n",
		"pkg/__init__.py":      "",
	}
	secret := map[string]string{
		".env":                 "AWS_ACCESS_KEY_ID=" + testAWSKey + "\nAWS_SECRET_ACCESS_KEY=" + testAWSSecret + "\n",
		".ssh/id_ed25519":      testPrivateKey,
		"deploy/server.pem":    testPrivateKey,
		".npmrc":               "//registry.npmjs.org/:_authToken=npm_b9Xq2LkT5vZp8RsW3NcY7dHf1JmQ4aEu6GoI\n",
		"vault/notes.txt":      "matches fleet_withhold\n",
		"src/deploy.sh":        "#!/bin/sh\nexport GITHUB_TOKEN=" + testGitHubPAT + "\n",
		".aws/credentials":     "[default]\naws_access_key_id = " + testAWSKey + "\n",
		"keys/gcp-sa-key.json": `{"type": "service_account", "private_key": "` + strings.ReplaceAll(testPrivateKey, "\n", `\n`) + `"}`,
	}
	for rel, content := range ordinary {
		a.write(t, rel, content)
	}
	for rel, content := range secret {
		a.write(t, rel, content)
	}
	s1, _, err := a.store.Take(ctx, "quiet", 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewShipper(a.store, c, withholder(t, "vault"), "builder", "machine-a", nil).Ship(ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Withheld) != len(secret) {
		t.Errorf("withheld %d files, want %d: %+v", len(st.Withheld), len(secret), st.Withheld)
	}

	// Every object in the bucket, read back: no credential, every
	// ordinary file, and no tree naming a withheld file.
	names, err := c.ListObjects(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, name := range names {
		all.WriteString(readObject(t, c, name))
		all.WriteString("\x00")
	}
	bucket := all.String()
	for _, leak := range []string{testAWSKey, testAWSSecret, testGitHubPAT, "b3BlbnNzaC1rZXktdjEAAAAA", "npm_b9Xq2LkT5vZp8RsW3NcY7dHf1JmQ4aEu6GoI", "matches fleet_withhold"} {
		if strings.Contains(bucket, leak) {
			t.Errorf("the bucket holds %q", leak)
		}
	}
	for rel, content := range ordinary {
		if !strings.Contains(bucket, content) {
			t.Errorf("the bucket lacks the content of %s", rel)
		}
	}
	for _, name := range []string{"id_ed25519\x00", "server.pem\x00", "deploy.sh\x00", "credentials\x00", "gcp-sa-key.json\x00"} {
		if strings.Contains(bucket, name) {
			t.Errorf("a tree in the bucket names %q", strings.TrimSuffix(name, "\x00"))
		}
	}

	// The manifest names each withheld file and why.
	var m Manifest
	if err := json.Unmarshal([]byte(readObject(t, c, "snap/builder/"+s1.ID)), &m); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, w := range m.Withheld {
		reasons[w.Path] = w.Reason
	}
	for rel := range secret {
		if reasons[rel] == "" {
			t.Errorf("the manifest does not name %s as withheld: %+v", rel, m.Withheld)
		}
	}
	for rel, want := range map[string]string{".env": ".env", "vault/notes.txt": "fleet_withhold", "src/deploy.sh": "secret guard", "deploy/server.pem": "private key"} {
		if !strings.Contains(reasons[rel], want) {
			t.Errorf("%s withheld because %q, want it to say %q", rel, reasons[rel], want)
		}
	}
	if m.Commit == "" || m.Commit == s1.ID {
		t.Errorf("the manifest ships commit %q: want a copy of %s without the withheld files", m.Commit, s1.ID)
	}

	// The local snapshot stays whole.
	d, err := a.store.Show(ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != len(ordinary)+len(secret) {
		t.Errorf("the local snapshot holds %d files, want %d", len(d.Files), len(ordinary)+len(secret))
	}

	// Machine B has an .env of its own: the restore leaves it and says so.
	b.write(t, ".env", "B_OWN=1\n")
	if _, err := Fetch(ctx, b.store, c, "builder", s1.ID[:12]); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Restore(ctx, s1.ID[:12], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.read(t, ".env"); got != "B_OWN=1\n" {
		t.Errorf("B's .env after the restore = %q", got)
	}
	for rel, content := range ordinary {
		if got := b.read(t, rel); got != content {
			t.Errorf("%s on B = %q", rel, got)
		}
	}
	left := map[string]string{}
	for _, r := range res.Refused {
		left[r.Path] = r.Reason
	}
	for rel := range secret {
		if !strings.Contains(left[rel], "withheld") {
			t.Errorf("the restore does not say %s was withheld: %+v", rel, res.Refused)
		}
		if _, err := os.Lstat(filepath.Join(b.work, rel)); rel != ".env" && err == nil {
			t.Errorf("%s exists on B", rel)
		}
	}
	if bd, err := b.store.Show(ctx, s1.ID); err != nil || len(bd.Withheld) != len(secret) {
		t.Errorf("show on B: %d withheld (%v), want %d", len(bd.Withheld), err, len(secret))
	}
}

// readObject reads one object of the bucket whole.
func readObject(t *testing.T, c *fleet.Client, name string) string {
	t.Helper()
	rc, _, err := c.OpenObject(context.Background(), name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}
