package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// A batch waits for writers already running only after a batch that
// carried several: a lone writer never yields, and one after a batch of
// three, with nobody else writing, yields a few times and commits alone.
func TestGatherOnlyWhenWritersArriveTogether(t *testing.T) {
	var yields atomic.Int32
	e := openTestEngineWith(t, t.TempDir(), func(e *Engine[counter]) {
		e.yield = func() { yields.Add(1) }
	})
	defer e.Close()
	put := func(key string) {
		t.Helper()
		if err := putKey(e, key); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("alone-%d", i))
	}
	if n := yields.Load(); n != 0 {
		t.Fatalf("lone writers one after another: %d yields, want none", n)
	}
	// A lazy op riding on a write is no second writer.
	e.Lazy(func(c counter) (uint64, error) { return 0, c.rec.Put(testData, []byte("lazy"), []byte("v")) })
	put("with-lazy")
	put("after-lazy")
	if n := yields.Load(); n != 0 {
		t.Fatalf("a write after one that carried a lazy op: %d yields, want none", n)
	}

	// Three writers arrive together: they commit as one batch.
	together := func(prefix string, n int) {
		t.Helper()
		e.commitMu.Lock() // a commit in progress: each op waits for the writer goroutine
		before := e.Stats()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := putKey(e, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
					t.Error(err)
				}
			})
		}
		// The writer goroutine holds one op, waiting for the lock; the rest wait in the queue.
		testwait.Until(t, func() string { return fmt.Sprintf("%d ops queued", len(e.ops)) }, func() bool { return len(e.ops) == n-1 })
		e.commitMu.Unlock()
		wg.Wait()
		if after := e.Stats(); after.Commits-before.Commits != 1 || after.Writes-before.Writes != uint64(n) {
			t.Fatalf("%d writers together: %d commits of %d writes, want one of %d", n, after.Commits-before.Commits, after.Writes-before.Writes, n)
		}
	}
	together("first", 3)
	yields.Store(0)
	put("after-3") // nobody else is writing: it waits its few yields, then commits alone
	if n := yields.Load(); n != maxGatherYields {
		t.Fatalf("a lone writer after a batch of 3: %d yields, want %d", n, maxGatherYields)
	}
	yields.Store(0)
	put("after-1")
	if n := yields.Load(); n != 0 {
		t.Fatalf("a lone writer after a lone writer: %d yields, want none", n)
	}

}

// gather ends as soon as as many ops wait as the last batch took.
func TestGatherEndsWhenTheWritersAreIn(t *testing.T) {
	e := &Engine[counter]{ops: make(chan *Op[counter], 8), lastWrites: 3}
	yields := 0
	e.yield = func() {
		yields++
		if yields == 1 { // two writers arrive during the first yield
			e.ops <- &Op[counter]{}
			e.ops <- &Op[counter]{}
		}
	}
	e.gather()
	if yields != 1 {
		t.Fatalf("two writers arrived during the first yield: %d yields, want 1", yields)
	}
}
