package residency

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency/storage"
)

// walOptions keep bbolt behind the log for the whole test: nothing is
// checkpointed unless the log fills.
func walOptions(dir string, size int64) Options {
	return Options{Agent: "builder", Dir: dir, Upstreams: []string{"a", "b"},
		flushDelay: time.Hour, lazyDelay: 200 * time.Millisecond, walSize: size}
}

// snapshot is everything a reopened store must give back.
type snapshot struct {
	Resume     capsule.Resume
	PendingA   []capsule.Write
	PendingB   []capsule.Write
	Dead       []DeadLetter
	Acked      uint64
	LogHead    uint64
	DeadCountA int
}

func takeSnapshot(t *testing.T, s *Store) snapshot {
	t.Helper()
	pa, err := s.Pending("a", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := s.Pending("b", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.DeadLetters("")
	if err != nil {
		t.Fatal(err)
	}
	// The in-memory list of logged seqs holds exactly the log's entries.
	var inLog []uint64
	s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLog).ForEach(func(k, _ []byte) error {
			inLog = append(inLog, binary.BigEndian.Uint64(k))
			return nil
		})
	})
	s.mu.RLock()
	logged := slices.Clone(s.logged)
	s.mu.RUnlock()
	if !slices.Equal(logged, inLog) {
		t.Fatalf("seqs in memory %v, in the log %v", logged, inLog)
	}
	// The in-memory count agrees with a walk of the log.
	for up, ws := range map[string][]capsule.Write{"a": pa, "b": pb} {
		for _, after := range []uint64{0, 3, s.LogHead()} {
			want := 0
			for _, w := range ws {
				if w.Seq > after {
					want++
				}
			}
			if n, _ := s.PendingCount(up, after); n != want {
				t.Fatalf("PendingCount(%s, %d) = %d, the log holds %d", up, after, n, want)
			}
		}
	}
	return snapshot{Resume: s.Resume(), PendingA: pa, PendingB: pb, Dead: dead,
		Acked: s.Acknowledged("a"), LogHead: s.LogHead(), DeadCountA: s.DeadCount("a")}
}

// mixedWorkload makes every kind of change the store records: checkpoints
// with decisions and commitments (open, close, drop), a capsule, signals,
// receipts, acknowledgements that prune the log, dead letters and their
// retry and discard.
func mixedWorkload(t *testing.T, s *Store, round int) {
	t.Helper()
	ctx := context.Background()
	must := func(_ uint64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		must(s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str(fmt.Sprintf("round %d step %d", round, i)),
			Decide: &capsule.Decision{Chosen: fmt.Sprint("option ", i), Because: "because it is the cheapest of the three"}}, capsule.OriginExplicit))
	}
	must(s.Checkpoint(ctx, &capsule.Checkpoint{Commitments: &capsule.CommitmentOps{
		Open: []capsule.OpenCommitment{{Title: fmt.Sprint("first ", round)}, {Title: fmt.Sprint("second ", round)}}}}, capsule.OriginExplicit))
	r := s.Resume()
	var ids []string
	for _, c := range r.Commitments {
		if c.Status == capsule.CommitmentOpen {
			ids = append(ids, c.ID)
		}
	}
	must(s.Checkpoint(ctx, &capsule.Checkpoint{Commitments: &capsule.CommitmentOps{
		Close: []capsule.CloseCommitment{{ID: ids[0], Evidence: "post:0b7f9a6e-7c1a-4f59-9d3b-2f64a0f1c9de"}},
		Drop:  []capsule.DropCommitment{{ID: ids[1], Reason: "superseded by the new plan"}}}}, capsule.OriginExplicit))
	must(s.PutCapsule(ctx, &capsule.Capsule{Version: "1", Goal: fmt.Sprint("goal ", round)}, false, capsule.OriginExplicit))
	must(s.Signal(ctx, &capsule.Signal{Kind: "context", UsedFraction: ptrF(float64(40+round) / 100)}))
	must(s.AddReceipt(ctx, fmt.Sprintf("commit %07x round %d", round+1, round), true))
	head := s.LogHead()
	pending, err := s.Pending("a", 0, 1000)
	if err != nil || len(pending) < 2 {
		t.Fatalf("pending: %v %d", err, len(pending))
	}
	if err := s.Reject(ctx, "a", pending[:1], "400 refused", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	must(0, func() error { _, err := s.RetryDead(ctx, "a", pending[0].Seq); return err }())
	s.Ack("a", head, []string{"a", "b"})
	s.Ack("b", head-1, []string{"a", "b"})
	waitAcked(t, s, "a", head)
	waitAcked(t, s, "b", head-1)
}

func ptrF(f float64) *float64 { return &f }

// walOffset reads where the next record goes, on the writer goroutine that
// owns it.
func walOffset(t *testing.T, s *Store) int64 {
	t.Helper()
	var off int64
	if err := s.view(func(*bolt.Tx) error { off = s.eng.Log().Used(); return nil }); err != nil {
		t.Fatal(err)
	}
	return off
}

// boltSeq reads the sequence number bbolt itself holds, without the log.
func boltSeq(t *testing.T, dir string) uint64 {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, File), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var d doc
	db.View(func(tx *bolt.Tx) error { return json.Unmarshal(tx.Bucket(bucketState).Get(keyDoc), &d) })
	return d.Seq
}

// openStore opens a store for a test and closes it when the test ends (a
// store the test closed or crashed already stays as it is).
func openStore(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// wantSnapshot fails the test unless s gives back want.
func wantSnapshot(t *testing.T, s *Store, want snapshot, when string) {
	t.Helper()
	if got := takeSnapshot(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", when, got, want)
	}
}

// crash stops the store as a SIGKILL would: bbolt keeps only what was
// checkpointed, the log keeps every answered batch.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.eng.Crash()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWALReplaysAnsweredWritesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	mixedWorkload(t, s, 1)
	mixedWorkload(t, s, 2)
	want := takeSnapshot(t, s)
	crash(t, s)
	if got := boltSeq(t, dir); got >= want.Resume.Seq {
		t.Fatalf("bbolt alone holds seq %d of %d: the test would not exercise the log", got, want.Resume.Seq)
	}
	s = openStore(t, walOptions(dir, storage.DefaultLogSize))
	if s.Recovery().Replayed == 0 {
		t.Fatal("nothing was replayed")
	}
	wantSnapshot(t, s, want, "after replay")
	if boltSeq := s.cur.Seq; boltSeq != want.Resume.Seq {
		t.Fatalf("seq %d", boltSeq)
	}
	// The residency goes on from where it was.
	if _, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str("after")}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	if r := s.Resume(); r.Seq != want.Resume.Seq+1 || r.Focus != "after" {
		t.Fatalf("after replay and one more write: seq %d focus %q", r.Seq, r.Focus)
	}
}

func TestWALIgnoresTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	mixedWorkload(t, s, 1)
	want := takeSnapshot(t, s)
	off := walOffset(t, s)
	crash(t, s)

	// A batch that was being written when the power went: its header made
	// it, its body did not. It was never answered and must not appear.
	f, err := os.OpenFile(filepath.Join(dir, WALFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, storage.HeaderSize+10)
	binary.LittleEndian.PutUint32(hdr[0:], 0xdeadbeef)
	binary.LittleEndian.PutUint32(hdr[4:], 4000)
	binary.LittleEndian.PutUint64(hdr[8:], 1<<40)
	copy(hdr[storage.HeaderSize:], "\x01partial")
	if _, err := f.WriteAt(hdr, off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s = openStore(t, walOptions(dir, storage.DefaultLogSize))
	wantSnapshot(t, s, want, "after a torn tail")
}

// A small log fills up: the store checkpoints and starts a new lap, and
// records of the old lap left further in the file are never replayed.
func TestWALLapsAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	opts := walOptions(dir, 64<<10)
	s := openStore(t, opts)
	ctx := context.Background()
	laps := 0
	for i := 0; laps < 3; i++ {
		before := walOffset(t, s)
		if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str(fmt.Sprint("write ", i)),
			WorkingState: &capsule.WorkingState{NextAction: str(strings.Repeat("n", 900+i%50)), LastResult: str("ok")}}, capsule.OriginExplicit); err != nil {
			t.Fatal(err)
		}
		if walOffset(t, s) < before {
			laps++
		}
		if i > 10000 {
			t.Fatal("the log never started a new lap")
		}
	}
	// A few writes into the new lap, then a crash: the replay must take the
	// new lap's records and stop at the stale ones after them.
	for i := 0; i < 3; i++ {
		if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str(fmt.Sprint("last ", i))}, capsule.OriginExplicit); err != nil {
			t.Fatal(err)
		}
	}
	want := takeSnapshot(t, s)
	crash(t, s)
	if boltSeq(t, dir) >= want.Resume.Seq {
		t.Fatal("bbolt holds every write: the test would not exercise the log")
	}
	s = openStore(t, opts)
	wantSnapshot(t, s, want, "after laps")
}

// A batch larger than the whole log is made durable by bbolt's own commit.
func TestWALBatchLargerThanLog(t *testing.T) {
	dir := t.TempDir()
	opts := walOptions(dir, 8<<10)
	s := openStore(t, opts)
	big := strings.Repeat("a long note ", 2000) // 24 KB
	if _, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{
		WorkingState: &capsule.WorkingState{NextAction: str("go on"), LastResult: &big}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	want := takeSnapshot(t, s)
	crash(t, s)
	if got := boltSeq(t, dir); got != want.Resume.Seq {
		t.Fatalf("bbolt holds seq %d, want %d", got, want.Resume.Seq)
	}
	s = openStore(t, opts)
	wantSnapshot(t, s, want, "the large batch did not survive")
}

// A batch whose log write fails is refused with 500 and leaves no trace;
// the batches before it stay.
func TestWALWriteFailureRefusesBatchOnly(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	ctx := context.Background()
	mixedWorkload(t, s, 1)
	want := takeSnapshot(t, s)
	// Break the log under the writer: the next append fails.
	s.eng.Log().Close()
	_, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("lost")}, capsule.OriginExplicit)
	var ce *capsule.Error
	if err == nil || !errors.As(err, &ce) || ce.Status != 500 {
		t.Fatalf("write with a broken log: %v", err)
	}
	wantSnapshot(t, s, want, "a refused batch changed the state")
	// Close checkpoints what was answered, and only that.
	if err := s.Close(); err == nil {
		t.Log("closing the already closed log reported no error")
	}
	s = openStore(t, walOptions(dir, storage.DefaultLogSize))
	wantSnapshot(t, s, want, "after reopen")
}

func TestWALGapIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	mixedWorkload(t, s, 1)
	crash(t, s)
	// Renumber the log as if it belonged to another residency: its first
	// record no longer follows what bbolt holds.
	path := filepath.Join(dir, WALFile)
	data, _ := os.ReadFile(path)
	recs := parseLog(data)
	if len(recs) == 0 {
		t.Fatal("no records")
	}
	f := mustOpenFile(t, path)
	if _, err := f.WriteAt(storage.EncodeRecord(recs[0].ID+100, recs[0].Payload), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err := Open(walOptions(dir, storage.DefaultLogSize))
	if err == nil || !strings.Contains(err.Error(), "records are missing") {
		t.Fatalf("open with a gap: %v", err)
	}
}

func mustOpenFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Reads go through the open transaction but never commit the lazy ops
// waiting (that would put a sync on every resume); the lazy ops commit on
// their own after lazyDelay.
func TestReadsDoNotCommitLazyOps(t *testing.T) {
	s := openStore(t, walOptions(t.TempDir(), storage.DefaultLogSize))
	if _, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str("x")}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	off := walOffset(t, s)
	s.Visited(visitOf(s)) // a visit: queues a lazy reset
	for i := 0; i < 5; i++ {
		if _, err := s.PendingCount("a", 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := walOffset(t, s); got != off {
		t.Fatalf("a read committed the lazy op (log offset %d -> %d)", off, got)
	}
	deadline := time.Now().Add(60 * time.Second)
	for walOffset(t, s) == off {
		if time.Now().After(deadline) {
			t.Fatal("the lazy op never committed on its own")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Removing residency.db to start over, with the log of the old one left
// beside it: the old records are set aside, not replayed into the new
// state, and the new log works (a crash after it replays the new records
// only).
func TestWALOfARemovedResidencyIsSetAside(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	mixedWorkload(t, s, 1)
	crash(t, s)
	if err := os.Remove(filepath.Join(dir, File)); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, walOptions(dir, storage.DefaultLogSize)) // beside an old log
	if rec := s.Recovery(); rec.Foreign == 0 || rec.Replayed != 0 {
		t.Fatalf("recovery %+v", rec)
	}
	if r := s.Resume(); r.Seq != 0 || r.Focus != "" {
		t.Fatalf("the old records leaked into the new state: seq %d focus %q", r.Seq, r.Focus)
	}
	if _, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str("fresh start")}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	want := takeSnapshot(t, s)
	crash(t, s)
	s = openStore(t, walOptions(dir, storage.DefaultLogSize))
	if rec := s.Recovery(); rec.Replayed != 1 || rec.Foreign != 0 {
		t.Fatalf("recovery after the fresh start: %+v", rec)
	}
	wantSnapshot(t, s, want, "after the fresh start")
}

// parseLog (tests) returns the run of valid, consecutive records at the
// start of data.
func parseLog(data []byte) []storage.Record {
	recs, _ := storage.ParseRun(data)
	return recs
}
