package policy

import (
	"context"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// Snapshotter takes the work snapshot an automatic checkpoint carries (the
// capture passes one in with SetSnapshotter; without one the policy takes
// none).
type Snapshotter interface {
	// Work snapshots the work tree for trigger (the snapshot belongs to the
	// residency's seq) and returns what is new since the last record
	// Written was told about: the newest snapshot when it was not recorded
	// yet, the files it changed, the commits since. nil means nothing is
	// new. An error is the snapshot's (the Snapshotter reports it; the
	// policy goes on with the checkpoint).
	Work(ctx context.Context, trigger string, seq uint64) (*capsule.Work, error)
	// Written tells that w was stored, so what it carried is not new again.
	Written(w *capsule.Work)
}

// TriggerCheckpoint is the work record that follows the agent's own
// checkpoint (snapshots.on_explicit_checkpoint).
const TriggerCheckpoint = "checkpoint"

// The agent's turn: a snapshot as its prompt arrives and one as it stops,
// so that the two bound what the turn changed (one diff), whatever quiet
// periods fell inside it.
const (
	TriggerTurnStart = "turn_start" // UserPromptSubmit: the tree the turn starts from
	TriggerTurnEnd   = "turn_end"   // Stop: the tree the turn leaves
)

// workTriggers are the triggers that follow changes and so take a work
// snapshot: idle and refresh only re-send the status.
var workTriggers = map[string]bool{
	TriggerQuiet: true, TriggerThreshold: true, TriggerPreCompaction: true,
	TriggerSessionEnd: true, TriggerCheckpoint: true,
	TriggerTurnStart: true, TriggerTurnEnd: true,
}

// turnTriggers take their snapshot even when the hourly cap holds the
// work record back: a snapshot stays on the machine and costs no write
// upstream, and a turn that is not bounded by two snapshots cannot be
// rewound as one. The record waits for the next trigger, which finds
// the snapshot not yet recorded.
var turnTriggers = map[string]bool{TriggerTurnStart: true, TriggerTurnEnd: true}

// turn is a turn's snapshot (and its work record, when something is new).
// A policy trigger that comes after it finds the same tree and takes no
// second snapshot of it, so the turn's trigger names the snapshot.
func (p *Policy) turn(ctx context.Context, trigger string, now time.Time) []Action {
	if p.snap == nil {
		return nil
	}
	return p.fire(ctx, plan{trigger: trigger, workOnly: true}, now)
}

// SetSnapshotter makes every trigger that follows changes take a work
// snapshot and write a work record when something is new. Call it before
// Run.
func (p *Policy) SetSnapshotter(s Snapshotter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snap = s
	p.workSince = p.now()
}

// work is the snapshot step of a trigger: it snapshots the tree and, when
// something is new, writes one work record (under the hourly cap, like any
// automatic write). wrote says the state moved on (the caller reads it
// again before its conditional checkpoint).
func (p *Policy) work(ctx context.Context, pl plan, st capsule.Resume, now time.Time) (acts []Action, wrote bool) {
	if p.snap == nil || !workTriggers[pl.trigger] || st.Stopped != nil {
		return nil, false
	}
	if !p.allow(now, false) {
		if turnTriggers[pl.trigger] {
			_, _ = p.snap.Work(ctx, pl.trigger, st.Seq) // the snapshot only; the record waits
			return []Action{{Trigger: pl.trigger, Work: true, Err: ErrRateLimited}}, false
		}
		p.holdBack(pl.trigger, pl.seal)
		return []Action{{Trigger: pl.trigger, Work: true, Err: ErrRateLimited}}, false
	}
	w, err := p.snap.Work(ctx, pl.trigger, st.Seq)
	if err != nil || w == nil {
		return nil, false
	}
	if f := st.Context.UsedFraction; f != nil {
		v := *f
		w.UsedFraction = &v
	}
	w.Plan = slices.Clone(st.Plan)
	if w.Plan == nil {
		w.Plan = []capsule.PlanStep{}
	}
	if w.Commits == nil {
		w.Commits = []string{}
	}
	if w.Files == nil {
		w.Files = []capsule.WorkFile{}
	}
	// What Q-Day may take: a private summary, and the snapshot as the
	// result's reference. The store drops it when the agent wrote its own
	// working state since the last record.
	sum := w.Summary()
	qd := &capsule.Checkpoint{WorkingState: &capsule.WorkingState{LastResult: &sum}}
	if w.Snapshot != nil {
		qd.WorkingState.ResultRef = capsule.NullableString{Set: true, Valid: true, Value: w.Snapshot.ID}
	}
	seq, err := p.write(ctx, plan{trigger: pl.trigger}, now, func() (uint64, error) {
		return p.store.Work(ctx, w, qd, p.workSince)
	})
	if err != nil {
		return []Action{{Trigger: pl.trigger, Work: true, Err: err}}, false
	}
	if seq == 0 { // the residency is stopped
		return nil, false
	}
	p.snap.Written(w)
	p.workSince = now
	if pl.quiet {
		p.lastQuiet = now
	}
	return []Action{{Trigger: pl.trigger, Seq: seq, Work: true}}, true
}
