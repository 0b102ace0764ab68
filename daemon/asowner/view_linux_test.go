package asowner

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestViewsAnswerFromTheLastAnswer: what every resume and status asks the
// worker (Newest, GCProblem, WorkdirProblem, Interrupted) is answered from
// its last answer for viewFresh, so a worker killed after it answered is
// not asked again within it; a call that changes the store (a Take) drops
// what was kept, so the next Newest is the new snapshot; and once the last
// answer has aged, the worker is asked again.
func TestViewsAnswerFromTheLastAnswer(t *testing.T) {
	ctx := context.Background()
	dir, owner := ownerTree(t)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "a.txt"), "one\n")
	give(t, owner, work)
	log, lines := newLog()
	pool := NewPool(Options{Logger: log})
	defer pool.Close()
	w := pool.For(owner)
	st, err := w.OpenStore(ctx, snapshot.Options{Dir: filepath.Join(dir, "state", "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatalf("open: %v\n%s", err, lines)
	}
	defer st.Close()
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	st.views.clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	first, _, err := st.Take(ctx, "start", 1)
	if err != nil {
		t.Fatalf("take: %v\n%s", err, lines)
	}
	if n, ok := st.Newest(); !ok || n.ID != first.ID {
		t.Fatalf("newest: %+v %v", n, ok)
	}
	if p := st.GCProblem(); p != "" {
		t.Fatalf("gc problem: %q", p)
	}
	killWorker(t, w)
	if n, ok := st.Newest(); !ok || n.ID != first.ID {
		t.Fatalf("newest within viewFresh of the last answer, the worker dead: %+v %v", n, ok)
	}
	if p := st.GCProblem(); p != "" {
		t.Fatalf("gc problem within viewFresh of the last answer, the worker dead: %q (it was asked)", p)
	}

	writeFile(t, filepath.Join(work, "a.txt"), "two\n")
	give(t, owner, work)
	var second snapshot.Snapshot
	testwait.Until(t, func() string { return "no take after the worker died: " + lines.String() }, func() bool {
		second, _, err = st.Take(ctx, "quiet", 2)
		return err == nil
	})
	if n, ok := st.Newest(); !ok || n.ID != second.ID {
		t.Fatalf("newest right after a take: %+v %v, want %s (the take drops the kept answer)", n, ok, second.ID)
	}

	// Aged: the worker is asked again, and a dead one that cannot be
	// asked is a problem.
	if p := st.GCProblem(); p != "" {
		t.Fatalf("gc problem: %q", p)
	}
	killWorker(t, w)
	if p := st.GCProblem(); p != "" {
		t.Fatalf("gc problem within viewFresh: %q", p)
	}
	advance(viewFresh)
	if p := st.GCProblem(); p == "" {
		t.Fatal("gc problem once the last answer aged, the worker dead: none (it was not asked)")
	}
}
