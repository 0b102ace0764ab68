package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	testMeta = []byte("meta")
	testData = []byte("data")
)

// counter is the work of a test batch: the changes, and a seq per write.
type counter struct {
	rec *Recorder
	seq *uint64
}

// openTestEngine opens an engine over dir whose ops put keys in the data
// bucket; it flushes to bbolt only on a clean Close.
func openTestEngine(t *testing.T, dir string) *Engine[counter] {
	t.Helper()
	return openTestEngineWith(t, dir, nil)
}

// openTestEngineWith is openTestEngine with setup run on the engine before
// its writer starts.
func openTestEngineWith(t *testing.T, dir string, setup func(*Engine[counter])) *Engine[counter] {
	t.Helper()
	db, err := OpenBolt(filepath.Join(dir, "test.db"), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	hooks := Hooks[counter]{
		Begin:   func(rec *Recorder) counter { return counter{rec, &seq} },
		End:     func(c counter, _ bool) (uint64, error) { return *c.seq, nil },
		Publish: func(counter) {},
		Failed:  func(err error) error { return fmt.Errorf("not stored: %w", err) },
	}
	opts := EngineOptions{Dir: dir, LogSize: 64 << 10, FlushDelay: time.Hour,
		Buckets: [][]byte{testMeta, testData}, Meta: testMeta, StartRecord: AppendPut(nil, testMeta, []byte("started"), []byte{1})}
	e, err := OpenEngine(db, opts, hooks, func(*bolt.Tx) (uint64, error) { return 0, nil })
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if setup != nil {
		setup(e)
	}
	e.Start()
	return e
}

func putKey(e *Engine[counter], key string) error {
	_, err := e.Submit(context.Background(), func(c counter) (uint64, error) {
		*c.seq++
		return *c.seq, c.rec.Put(testData, []byte(key), []byte("v"))
	}, false)
	return err
}

func keysIn(t *testing.T, e *Engine[counter]) []string {
	t.Helper()
	var keys []string
	if err := e.View(func(tx *bolt.Tx) error {
		return tx.Bucket(testData).ForEach(func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// Every answered write survives a crash: bbolt was never flushed, and the
// log's records are replayed into it on the next open.
func TestEngineReplaysAnsweredWritesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	e := openTestEngine(t, dir)
	for _, k := range []string{"a", "b", "c"} {
		if err := putKey(e, k); err != nil {
			t.Fatal(err)
		}
	}
	e.Crash()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openTestEngine(t, dir)
	defer e.Close()
	if r := e.Recovery(); r.Replayed != 3 {
		t.Fatalf("recovery %+v, want 3 records replayed", r)
	}
	if got := keysIn(t, e); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("after the crash: %v", got)
	}
}

// An op that refuses is answered with its own error and leaves no trace;
// the engine goes on.
func TestEngineRefusedOpLeavesNothing(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	refusal := errors.New("refused")
	_, err := e.Submit(context.Background(), func(c counter) (uint64, error) { return 0, refusal }, false)
	if !errors.Is(err, refusal) {
		t.Fatalf("refused op: %v", err)
	}
	if err := putKey(e, "a"); err != nil {
		t.Fatal(err)
	}
	if got := keysIn(t, e); fmt.Sprint(got) != "[a]" {
		t.Fatalf("keys %v", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := putKey(e, "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// The lazy flush commits the lazy ops even when the writer took it with a
// batch of reads only: a visit's reset (a lazy op) must not wait for the
// next write, which on an idle agent may never come. The test holds the
// writer at the flush with a read queued.
func TestLazyFlushWithAReadQueued(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	e.commitMu.Lock()
	putLazy(e)
	fireLazyTimer(e)
	waitUntil(t, "the writer to take the flush", func() bool { return len(e.flush) == 0 })
	read := make(chan []string, 1)
	go func() { read <- keysIn(t, e) }()
	waitUntil(t, "the read to be queued", func() bool { return len(e.ops) == 1 })
	e.commitMu.Unlock()
	<-read
	waitUntil(t, "the lazy op to be committed", func() bool { return len(keysIn(t, e)) == 1 })
}

// Lazy ops ride on the flush to bbolt when it comes before their own
// timer: bbolt's commit holds them, and no log record is written (or
// synced) for them.
func TestLazyOpsRideTheFlush(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	if err := putKey(e, "a"); err != nil {
		t.Fatal(err)
	}
	putLazy(e)
	e.commitMu.Lock()
	records, syncs := e.log.LastID(), e.log.syncs
	e.flushTimer.Reset(0) // the flush is due now, by the test's hand
	e.commitMu.Unlock()
	waitUntil(t, "the flush to bbolt", func() bool { return e.Stats().Flushes == 1 })
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	if e.log.LastID() != records || e.log.syncs != syncs || e.log.Used() != 0 {
		t.Fatalf("log records %d -> %d, syncs %d -> %d, used %d: the lazy op was logged, not flushed with bbolt",
			records, e.log.LastID(), syncs, e.log.syncs, e.log.Used())
	}
	if e.lazyOps != nil {
		t.Fatal("the lazy op is still queued after the flush")
	}
	if err := e.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(testData).Get([]byte("lazy")) == nil {
			return errors.New("bbolt does not hold the lazy op's key")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A lazy op with nothing to ride on commits on its own as a log record
// that is not synced; the next write's sync makes it durable, and a crash
// after that replays both.
func TestLazyOpAloneIsLoggedUnsynced(t *testing.T) {
	dir := t.TempDir()
	e := openTestEngine(t, dir)
	e.commitMu.Lock()
	first, synced := e.log.LastID(), e.log.syncs // the start record's
	e.commitMu.Unlock()
	putLazy(e)
	fireLazyTimer(e)
	waitUntil(t, "the lazy op to be committed", func() bool { return len(keysIn(t, e)) == 1 })
	e.commitMu.Lock()
	records, syncs := e.log.LastID(), e.log.syncs
	e.commitMu.Unlock()
	if records != first+1 || syncs != synced {
		t.Fatalf("after the lazy op alone: records %d -> %d, syncs %d -> %d; want one record, no sync", first, records, synced, syncs)
	}
	if err := putKey(e, "b"); err != nil {
		t.Fatal(err)
	}
	e.commitMu.Lock()
	records, syncs = e.log.LastID(), e.log.syncs
	e.commitMu.Unlock()
	if records != first+2 || syncs != synced+1 {
		t.Fatalf("after a write: records %d -> %d, syncs %d -> %d; want one record more, one sync", first, records, synced, syncs)
	}
	e.Crash()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openTestEngine(t, dir)
	defer e.Close()
	if got := keysIn(t, e); fmt.Sprint(got) != "[b lazy]" {
		t.Fatalf("after the crash: %v, want [b lazy]", got)
	}
}

// putLazy queues a lazy op that puts the key "lazy".
func putLazy(e *Engine[counter]) {
	e.Lazy(func(c counter) (uint64, error) { return 0, c.rec.Put(testData, []byte("lazy"), []byte("v")) })
}

// fireLazyTimer makes the lazy ops' timer fire now, by the test's hand.
func fireLazyTimer(e *Engine[counter]) {
	e.lazyMu.Lock()
	e.lazyTimer.Stop()
	e.lazyTimer = nil
	e.lazyMu.Unlock()
	e.flush <- struct{}{}
}

// A lazy op queued while a delay runs that an earlier op started (one a
// commit has taken since) is committed when that delay ends; one queued
// after it ended starts a delay of its own. No lazy op is left waiting
// for a write that may never come.
func TestLazyOpsShareARunningDelay(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	e.lazyMu.Lock()
	e.lazyDelay = 50 * time.Millisecond
	e.lazyMu.Unlock()
	lazyPut := func(key string) {
		e.Lazy(func(c counter) (uint64, error) { return 0, c.rec.Put(testData, []byte(key), []byte("v")) })
	}
	has := func(key string) func() bool {
		return func() bool {
			found := false
			if err := e.View(func(tx *bolt.Tx) error {
				found = tx.Bucket(testData).Get([]byte(key)) != nil
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return found
		}
	}
	lazyPut("first")                       // starts the delay
	if err := putKey(e, "a"); err != nil { // takes "first"; the delay runs on
		t.Fatal(err)
	}
	if !has("first")() {
		t.Fatal("the write did not take the lazy op queued before it")
	}
	lazyPut("second")
	waitUntil(t, "the running delay commits the op queued during it", has("second"))
	waitUntil(t, "the delay ends", func() bool {
		e.lazyMu.Lock()
		defer e.lazyMu.Unlock()
		return e.lazyTimer == nil
	})
	lazyPut("third")
	waitUntil(t, "a delay of its own commits the op queued after the last one ended", has("third"))
}

// waitUntil waits for cond, with a generous deadline, and fails naming what.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
