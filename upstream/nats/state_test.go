package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// resumeDoc is a resume document as the daemon would put it.
func resumeDoc(t testing.TB, agent string, seq uint64, focus, phase string, used float64) json.RawMessage {
	t.Helper()
	now := time.Now().UTC()
	r := capsule.Resume{Agent: agent, Seq: seq, Focus: focus, LastWriteAt: &now,
		Context:   capsule.ContextState{UsedFraction: &used},
		Upstreams: []capsule.UpstreamState{{Name: "fleet", State: "ok"}}}
	if phase != "" {
		r.PublicStatus = &capsule.PublicStatusRecord{PublicStatus: capsule.PublicStatus{Phase: phase, NextAction: "x"}, UpdatedAt: now}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestoreAndReplayGiveBackWhatReachedTheFleet(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "old-host" })

	// Nothing yet.
	r, err := a.Restore(ctx, "builder")
	if err != nil || r.Found || r.LastSeq != 0 {
		t.Fatalf("empty restore: %+v %v", r, err)
	}
	for seq := uint64(1); seq <= 30; seq++ {
		if err := a.Deliver(ctx, "builder", focusWrite("r1", seq, fmt.Sprint("focus ", seq))); err != nil {
			t.Fatal(err)
		}
		if seq == 20 { // the state is put less often than writes
			if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 20, "focus 20", "acting", 0.4), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another agent's writes stay apart.
	if err := a.Deliver(ctx, "other", focusWrite("r9", 1, "elsewhere")); err != nil {
		t.Fatal(err)
	}

	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "new-host" })
	r, err = b.Restore(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	var doc capsule.Resume
	if !r.Found || r.Machine != "old-host" || r.Self || r.Seq != 20 || r.LastSeq != 30 || r.Revision == 0 || r.At.IsZero() || r.Age < 0 || r.Age > time.Minute ||
		json.Unmarshal(r.State, &doc) != nil || doc.Focus != "focus 20" {
		t.Fatalf("restore: %+v", r)
	}
	// The writer restoring what it wrote itself knows it.
	if own, err := a.Restore(ctx, "builder"); err != nil || !own.Self {
		t.Fatalf("restore by its own writer: %+v %v", own, err)
	}
	var got []uint64
	err = b.Replay(ctx, "builder", r.Seq+1, func(w capsule.Write) error {
		got = append(got, w.Seq)
		if *w.Checkpoint.Focus != fmt.Sprint("focus ", w.Seq) {
			t.Errorf("write %d: %q", w.Seq, *w.Checkpoint.Focus)
		}
		return nil
	})
	if err != nil || len(got) != 10 || got[0] != 21 || got[9] != 30 {
		t.Fatalf("replay from 21: %v %v", got, err)
	}
	// From the start, stopping when fn says so.
	n := 0
	stop := errors.New("enough")
	if err := b.Replay(ctx, "builder", 0, func(capsule.Write) error {
		n++
		if n == 5 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) || n != 5 {
		t.Fatalf("replay stop: %d %v", n, err)
	}
	if err := b.Replay(ctx, "nobody", 0, func(capsule.Write) error { t.Error("called"); return nil }); err != nil {
		t.Fatal(err)
	}

	// The resumer view says where the state came from and how old it is.
	raw, err := b.Resume(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Found   bool   `json:"found"`
		LastSeq uint64 `json:"last_seq"`
		State   struct {
			Machine string `json:"machine"`
			Seq     uint64 `json:"seq"`
		} `json:"state"`
	}
	if json.Unmarshal(raw, &view) != nil || !view.Found || view.LastSeq != 30 || view.State.Machine != "old-host" || view.State.Seq != 20 {
		t.Fatalf("resume view %s", raw)
	}
}

func TestSameWriterRestartIsNoConflict(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, nil)
	rev, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 1, "f", "", 0), 0)
	if err != nil || rev == 0 {
		t.Fatal(rev, err)
	}
	a.Close()
	// The same machine after a restart, not knowing the revision.
	a2 := newTestClient(t, []string{serverURL(s)}, nil)
	rev2, err := a2.PutState(ctx, "builder", resumeDoc(t, "builder", 2, "f", "", 0), 0)
	if err != nil || rev2 <= rev {
		t.Fatalf("restart: %d %v", rev2, err)
	}
	// A stale revision of its own is no conflict either.
	if _, err := a2.PutState(ctx, "builder", resumeDoc(t, "builder", 3, "f", "", 0), rev); err != nil {
		t.Fatal(err)
	}
}

// conflictRecorder collects OnConflict calls.
type conflictRecorder struct {
	mu  sync.Mutex
	got []capsule.FleetConflictError
	ch  chan struct{}
}

func newRecorder() *conflictRecorder { return &conflictRecorder{ch: make(chan struct{}, 16)} }

func (r *conflictRecorder) on(ce capsule.FleetConflictError) {
	r.mu.Lock()
	r.got = append(r.got, ce)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *conflictRecorder) wait(t *testing.T, who string) capsule.FleetConflictError {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never reported the other writer", who)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[len(r.got)-1]
}

func TestSplitWritersBothReportAndNeitherOverwrites(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	ra, rb := newRecorder(), newRecorder()
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a"; o.OnConflict = ra.on })
	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-b"; o.OnConflict = rb.on })

	revA, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 5, "a's focus", "acting", 0.1), 0)
	if err != nil {
		t.Fatal(err)
	}
	// B starts the same agent (its local state empty): it resumes from the
	// fleet and writes on from A's revision, while A still runs.
	r, err := b.Restore(ctx, "builder")
	if err != nil || r.Revision != revA {
		t.Fatal(r, err)
	}
	// It is written. A may already have answered it, keeping its own state
	// apart, before B's call returns: then the write says so (held, A
	// named); on a machine where B returns first it says nothing yet.
	revB, err := b.PutState(ctx, "builder", resumeDoc(t, "builder", 6, "b's focus", "acting", 0.2), r.Revision)
	var held *capsule.FleetConflictError
	if err != nil && (!errors.As(err, &held) || !held.Held || held.Machine != "host-a") || revB <= revA {
		t.Fatalf("b's first write from the fleet's revision: revision %d, %v", revB, err)
	}

	// A sees B's write through the bucket without writing itself.
	ca := ra.wait(t, "a")
	if ca.Machine != "host-b" || ca.Held || ca.Agent != "builder" {
		t.Errorf("a's report: %+v", ca)
	}
	// B sees A (A kept its state apart, naming B).
	cb := rb.wait(t, "b")
	if cb.Machine != "host-a" || !cb.Held {
		t.Errorf("b's report: %+v", cb)
	}

	// A writes again: refused with the other writer named, nothing written over B.
	_, err = a.PutState(ctx, "builder", resumeDoc(t, "builder", 7, "a's newer focus", "acting", 0.1), revA)
	var ce *capsule.FleetConflictError
	if !errors.As(err, &ce) || !errors.Is(err, capsule.ErrFleetConflict) || ce.Machine != "host-b" || ce.Held || ce.Revision != revB {
		t.Fatalf("a's write: %v", err)
	}
	r, err = b.Restore(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	var doc capsule.Resume
	_ = json.Unmarshal(r.State, &doc)
	if r.Machine != "host-b" || doc.Focus != "b's focus" || r.Revision != revB {
		t.Fatalf("the key was written over: %+v %q", r, doc.Focus)
	}
	if len(r.Conflicts) != 1 || r.Conflicts[0].Machine != "host-a" || r.Conflicts[0].Seq != 7 {
		t.Fatalf("a's state is not kept apart: %+v", r.Conflicts)
	}
	// B's next write goes through and still reports A.
	if _, err := b.PutState(ctx, "builder", resumeDoc(t, "builder", 8, "b's", "acting", 0.2), revB); !errors.As(err, &ce) || !ce.Held || ce.Machine != "host-a" {
		t.Fatalf("b's write: %v", err)
	}
	for _, c := range []*Client{a, b} {
		if cs := c.Conflicts(); len(cs) != 1 || cs[0].Agent != "builder" {
			t.Errorf("%s conflicts: %+v", c.o.Machine, cs)
		}
	}
	// The fleet listing shows it too.
	fl, err := a.Agents(ctx)
	if err != nil || len(fl) != 1 || fl[0].Machine != "host-b" || len(fl[0].ConflictWith) != 1 || fl[0].ConflictWith[0] != "host-a" {
		t.Fatalf("fleet: %+v %v", fl, err)
	}
}

func TestResumeAnywhereIsNoConflict(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a" })
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 5, "f", "", 0), 0); err != nil {
		t.Fatal(err)
	}
	a.Close() // the pod is rescheduled

	rb := newRecorder()
	var seen atomic.Uint64 // the last revision b's watcher handled
	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) {
		o.Machine = "host-b"
		o.OnConflict = rb.on
		o.observed = func(_ string, rev uint64) { seen.Store(rev) }
	})
	r, err := b.Restore(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	rev := r.Revision
	for seq := uint64(6); seq < 10; seq++ {
		if rev, err = b.PutState(ctx, "builder", resumeDoc(t, "builder", seq, "f", "", 0), rev); err != nil {
			t.Fatalf("write %d: %v", seq, err)
		}
	}
	testwait.Until(t, func() string {
		return fmt.Sprintf("b's watcher saw revision %d, not the last written (%d)", seen.Load(), rev)
	}, func() bool { return seen.Load() >= rev })
	if cs := b.Conflicts(); len(cs) != 0 || len(rb.got) != 0 {
		t.Fatalf("a clean move reported as a conflict: %+v", cs)
	}
}

func TestFleetListsAgents(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a" })
	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-b" })
	if fl, err := a.Agents(ctx); err != nil || len(fl) != 0 {
		t.Fatalf("empty fleet: %+v %v", fl, err)
	}
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 3, "f", "acting", 0.83), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutState(ctx, "reviewer", resumeDoc(t, "reviewer", 9, "f", "", 0.1), 0); err != nil {
		t.Fatal(err)
	}
	fl, err := b.Agents(context.Background())
	if err != nil || len(fl) != 2 {
		t.Fatalf("fleet: %+v %v", fl, err)
	}
	x, y := fl[0], fl[1]
	if x.Agent != "builder" || x.Machine != "host-a" || x.Seq != 3 || x.PublicPhase != "acting" || x.ContextFraction == nil || *x.ContextFraction != 0.83 ||
		x.LastWrite == nil || x.UpdatedAt.IsZero() || len(x.Upstreams) == 0 || len(x.ConflictWith) != 0 {
		t.Errorf("builder: %+v", x)
	}
	if y.Agent != "reviewer" || y.Machine != "host-b" || y.PublicPhase != "" {
		t.Errorf("reviewer: %+v", y)
	}
}
