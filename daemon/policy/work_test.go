package policy

import (
	"context"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// fakeSnap is a Snapshotter whose tree changes when the test says so.
type fakeSnap struct {
	changed  bool
	n        int
	triggers []string
	written  int
}

func (f *fakeSnap) Work(ctx context.Context, trigger string, seq uint64) (*capsule.Work, error) {
	f.triggers = append(f.triggers, trigger)
	if !f.changed {
		return nil, nil
	}
	f.n++
	return &capsule.Work{Trigger: trigger,
		Snapshot: &capsule.WorkSnapshot{ID: "snap" + string(rune('0'+f.n)), Seq: seq, Modified: 1},
		Files:    []capsule.WorkFile{{Path: "a.go", Status: "modified", LinesAdded: 3, LinesDeleted: 1}}}, nil
}

func (f *fakeSnap) Written(*capsule.Work) { f.changed = false; f.written++ }

func TestWorkRecordOnTriggersThatFollowChanges(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	snap := &fakeSnap{}
	h.p.SetSnapshotter(snap)

	// A burst goes quiet: one work record (before the checkpoint), with
	// the Q-Day summary and the snapshot as the result's reference.
	snap.changed = true
	h.activity()
	acts := h.advance(20 * time.Second)
	if len(acts) != 2 || !acts[0].Work || acts[0].Err != nil || acts[0].Trigger != TriggerQuiet {
		t.Fatalf("quiet actions: %+v", acts)
	}
	if len(h.store.works) != 1 {
		t.Fatalf("%d work records", len(h.store.works))
	}
	w := h.store.works[0]
	if w.QDay == nil || *w.QDay.WorkingState.LastResult != "1 file changed (+3 −1)" || w.QDay.WorkingState.ResultRef.Value != "snap1" {
		t.Errorf("Q-Day part: %+v", w.QDay)
	}
	if w.QDay.PublicStatus != nil || w.QDay.Focus != nil {
		t.Errorf("the work summary reached more than the private working state: %+v", w.QDay)
	}
	if w.W.Plan == nil || w.W.Commits == nil {
		t.Errorf("plan and commits are lists, never null: %+v", w.W)
	}

	// Idle and refresh only re-send the status: no snapshot.
	snap.triggers = nil
	h.advance(15 * time.Minute)
	for _, tr := range snap.triggers {
		if tr == TriggerIdle || tr == TriggerRefresh {
			t.Errorf("trigger %s took a snapshot", tr)
		}
	}

	// The agent writes its own working state: the next record keeps the
	// work but leaves Q-Day's summary alone.
	h.store.applyLocked(&capsule.Checkpoint{WorkingState: &capsule.WorkingState{LastResult: ptr("taught the tokenizer")}}, capsule.OriginExplicit)
	snap.changed = true
	f := 0.6
	acts = h.handle(Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}})
	if len(acts) == 0 || !acts[0].Work || acts[0].Trigger != TriggerThreshold {
		t.Fatalf("threshold actions: %+v", acts)
	}
	if w := h.store.works[len(h.store.works)-1]; w.QDay != nil {
		t.Errorf("a work summary would override the agent's own newer working state: %+v", w.QDay)
	}

	// Nothing new: no record.
	n := len(h.store.works)
	f = 0.75
	h.handle(Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}})
	if len(h.store.works) != n {
		t.Errorf("a record without anything new")
	}

	// The agent's own checkpoint: a work record only.
	snap.changed = true
	cps := len(h.store.checkpoints())
	acts = h.handle(Input{Kind: KindCheckpoint})
	if len(acts) != 1 || !acts[0].Work || acts[0].Trigger != TriggerCheckpoint || len(h.store.checkpoints()) != cps {
		t.Errorf("explicit checkpoint actions: %+v", acts)
	}
}

func TestWorkRecordsCountInTheHourlyCap(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	snap := &fakeSnap{}
	h.p.SetSnapshotter(snap)
	limit := h.p.cap - sealReserve
	for range limit + 5 {
		snap.changed = true
		h.handle(Input{Kind: KindCheckpoint})
		h.clk.Advance(time.Second)
	}
	if n := len(h.store.works); n != limit {
		t.Errorf("%d work records in an hour, cap %d", n, limit)
	}
}

func TestNoWorkRecordWhileStopped(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	snap := &fakeSnap{changed: true}
	h.p.SetSnapshotter(snap)
	h.store.applyLocked(&capsule.Checkpoint{Stop: &capsule.Stop{Reason: "done"}}, capsule.OriginExplicit)
	h.handle(Input{Kind: KindCheckpoint})
	h.activity()
	h.advance(time.Minute)
	if len(h.store.works) != 0 || len(snap.triggers) != 0 {
		t.Errorf("stopped residency: %d records, snapshots %v", len(h.store.works), snap.triggers)
	}
}

func TestTurnSnapshotsBoundTheTurn(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	snap := &fakeSnap{}
	h.p.SetSnapshotter(snap)

	// A person edited between turns: the prompt's snapshot holds it.
	snap.changed = true
	acts := h.signal(capsule.Signal{Kind: capsule.SignalActivity, Event: "prompt"})
	if len(acts) != 1 || !acts[0].Work || acts[0].Trigger != TriggerTurnStart || acts[0].Err != nil {
		t.Fatalf("prompt actions: %+v", acts)
	}
	// The agent works; its Stop snapshots what the turn left, and sends
	// no checkpoint of its own.
	cps := len(h.store.checkpoints())
	snap.changed = true
	h.clk.Advance(5 * time.Second)
	acts = h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "stop"})
	if len(acts) != 1 || !acts[0].Work || acts[0].Trigger != TriggerTurnEnd {
		t.Fatalf("stop actions: %+v", acts)
	}
	if len(h.store.checkpoints()) != cps {
		t.Errorf("a turn's snapshot sent a checkpoint")
	}
	if got := []string{h.store.works[0].W.Trigger, h.store.works[1].W.Trigger}; got[0] != TriggerTurnStart || got[1] != TriggerTurnEnd {
		t.Errorf("records %v", got)
	}
	// The quiet period after the Stop finds the same tree: no second
	// record of it, its checkpoint still goes.
	h.advance(time.Minute)
	if len(h.store.works) != 2 {
		t.Errorf("%d work records after the quiet period, want the turn's 2", len(h.store.works))
	}

	// Over the hourly cap the turn's snapshot is still taken.
	for range h.p.cap {
		h.p.writes = append(h.p.writes, h.clk.Now())
	}
	snap.triggers = nil
	acts = h.signal(capsule.Signal{Kind: capsule.SignalActivity, Event: "prompt"})
	if len(snap.triggers) != 1 || snap.triggers[0] != TriggerTurnStart {
		t.Errorf("capped turn: snapshots %v", snap.triggers)
	}
	if len(acts) != 1 || acts[0].Err != ErrRateLimited || h.p.owed != "" {
		t.Errorf("capped turn: actions %+v, owed %q", acts, h.p.owed)
	}
}

func ptr(s string) *string { return &s }
