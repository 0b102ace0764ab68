package residency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// Import is an agent's state as a fleet holds it, for a residency whose
// local state is gone (a new machine, a new pod, a wiped state directory).
type Import struct {
	// State is the resume document the fleet kept; nil when it has none.
	State *capsule.Resume
	// Writes are the fleet's writes after State.Seq, in order: applied as
	// the store applies them, but not logged (the fleet has them).
	Writes []capsule.Write
	// SeqFloor: writes from now on are numbered after it (the fleet's
	// last write), so the agent's log continues where the fleet's ends.
	SeqFloor uint64
	// Refused are the parts of State and the Writes the guards refused
	// (they are left out of both): shown in resume and status, in the same
	// commit as the import.
	Refused []capsule.Refusal
	// RefusalOf, when set, names a write the store refuses on replay (an
	// operation the state does not allow: an unknown commitment, one open
	// too many) as a refusal, kept like Refused.
	RefusalOf func(w capsule.Write, e *capsule.Error) capsule.Refusal
}

// ImportResult says what Import did.
type ImportResult struct {
	// Merged is set when the residency had writes of its own already
	// (made while the fleet was unreachable): they were kept, and only
	// what they had not set was taken from the fleet.
	Merged bool
	// Applied and Skipped count the Writes replayed and those refused on
	// replay (an operation the state no longer allows).
	Applied, Skipped int
	// Seq is the residency's sequence number afterwards.
	Seq uint64
}

// Import brings the fleet's state into the residency in one commit. On an
// empty residency the state is taken whole and the writes after it are
// replayed; on one that has writes, nothing it holds is overwritten (see
// ImportResult.Merged) and the writes are not replayed. Either way the
// numbering goes on after SeqFloor, with this residency's own id in the
// Idempotency-Keys.
func (s *Store) Import(ctx context.Context, imp Import) (ImportResult, error) {
	var res ImportResult
	_, err := s.submit(ctx, func(t *txn) (uint64, error) {
		res = ImportResult{}
		var refused []capsule.Refusal
		d := t.d
		if d.Seq > 0 || t.logHead > 0 || t.capsule != nil {
			res.Merged = true
			t.mergeFleet(imp.State)
		} else {
			if imp.State != nil {
				t.takeFleet(imp.State)
			}
			for _, w := range imp.Writes {
				err := t.replayWrite(w)
				if err == nil {
					res.Applied++
					continue
				}
				res.Skipped++
				var ce *capsule.Error
				if imp.RefusalOf != nil && errors.As(err, &ce) {
					refused = append(refused, imp.RefusalOf(w, ce))
				}
			}
		}
		d.Seq = max(d.Seq, imp.SeqFloor)
		for _, r := range append(slices.Clone(imp.Refused), refused...) {
			r.At = t.now
			d.Refused = appendBounded(d.Refused, keepRefusals, r)
		}
		res.Seq = d.Seq
		t.events = append(t.events, Event{Seq: d.Seq, Kind: "restored", Summary: "state restored from the fleet"})
		return d.Seq, nil
	})
	return res, err
}

// takeFleet makes the fleet's state the residency's.
func (t *txn) takeFleet(st *capsule.Resume) {
	d := t.d
	d.Seq = st.Seq
	d.Focus, d.FocusUpdatedAt = st.Focus, st.FocusUpdatedAt
	d.WorkingState = st.WorkingState
	d.Commitments = slices.Clone(st.Commitments)
	d.NextCommitment = max(d.NextCommitment, maxCommitmentID(st.Commitments))
	d.Decisions = slices.Clone(st.Decisions)
	d.PublicStatus = st.PublicStatus
	d.Stopped = st.Stopped
	d.Receipts = slices.Clone(st.Receipts)
	d.Plan, d.PlanAt = slices.Clone(st.Plan), st.PlanUpdatedAt
	d.Context = st.Context
	d.LastWriteAt = st.LastWriteAt
	if st.Capsule != nil {
		c := *st.Capsule
		t.capsule, t.capsuleChanged = &c, true
		d.CapsuleSeq = c.Seq
	}
}

// mergeFleet adds to a residency that has writes of its own what the fleet
// holds and those writes did not set. The local stop state is kept: the
// local writes were accepted under it.
func (t *txn) mergeFleet(st *capsule.Resume) {
	if st == nil {
		return
	}
	d := t.d
	if d.FocusUpdatedAt == nil && d.Focus == "" {
		d.Focus, d.FocusUpdatedAt = st.Focus, st.FocusUpdatedAt
	}
	if d.WorkingState == nil {
		d.WorkingState = st.WorkingState
	}
	if d.PublicStatus == nil {
		d.PublicStatus = st.PublicStatus
	}
	if len(d.Plan) == 0 {
		d.Plan, d.PlanAt = slices.Clone(st.Plan), st.PlanUpdatedAt
	}
	if d.Context.UpdatedAt == nil {
		d.Context = st.Context
	}
	if len(d.Receipts) == 0 {
		d.Receipts = slices.Clone(st.Receipts)
	}
	// The fleet's decisions came first.
	ds := append(slices.Clone(st.Decisions), d.Decisions...)
	if len(ds) > keepDecisions {
		ds = ds[len(ds)-keepDecisions:]
	}
	d.Decisions = ds
	// The fleet's open commitments stay open here, under a new id when
	// a local one has theirs.
	ids := map[string]bool{}
	for _, c := range d.Commitments {
		ids[c.ID] = true
	}
	d.NextCommitment = max(d.NextCommitment, maxCommitmentID(d.Commitments), maxCommitmentID(st.Commitments))
	var add []capsule.Commitment
	for _, c := range st.Commitments {
		if c.Status != capsule.CommitmentOpen {
			continue
		}
		if ids[c.ID] {
			d.NextCommitment++
			c.ID = fmt.Sprintf("c_%d", d.NextCommitment)
		}
		add = append(add, c)
	}
	d.Commitments = append(add, d.Commitments...)
	if t.capsule == nil && st.Capsule != nil {
		c := *st.Capsule
		t.capsule, t.capsuleChanged = &c, true
		d.CapsuleSeq = c.Seq
	}
}

// replayWrite applies one of the fleet's writes as the store would have
// when it was made, without logging it; the error says why it did not.
func (t *txn) replayWrite(w capsule.Write) error {
	d := t.d
	if w.Seq > 0 && w.Seq-1 > d.Seq {
		d.Seq = w.Seq - 1 // the write keeps its number
	}
	prevNow := t.now
	if !w.At.IsZero() {
		t.now = w.At
	}
	defer func() { t.now = prevNow }()
	switch w.Kind {
	case capsule.WriteCheckpoint:
		if w.Checkpoint == nil {
			return errNothingToReplay
		}
		nLogged, head, nEvents := len(t.logged), t.logHead, len(t.events)
		seq, err := t.checkpoint(w.Checkpoint, w.Origin, nil)
		t.events = t.events[:nEvents]
		if err != nil {
			return err
		}
		if len(t.logged) > nLogged {
			// The fleet has it: not for the outbox.
			if err := t.delete(bucketLog, u64(seq)); err != nil {
				return err
			}
			t.logged, t.logHead = t.logged[:nLogged], head
		}
		return nil
	case capsule.WriteCapsule, capsule.WriteSeal:
		if w.Capsule == nil {
			return errNothingToReplay
		}
		d.Seq++
		at := t.now
		t.capsule = &capsule.CapsuleRecord{Capsule: *w.Capsule, StoredAt: at, Sealed: w.Kind == capsule.WriteSeal, Seq: d.Seq}
		t.capsuleChanged = true
		d.CapsuleSeq, d.LastWriteAt = d.Seq, &at
		return nil
	default:
		d.Seq++
		return nil
	}
}

// errNothingToReplay: a write of a kind that carries something, without it.
var errNothingToReplay = errors.New("the write carries nothing to replay")

// maxCommitmentID is the highest n of the ids c_n.
func maxCommitmentID(cs []capsule.Commitment) uint64 {
	var n uint64
	for _, c := range cs {
		if v, err := strconv.ParseUint(strings.TrimPrefix(c.ID, "c_"), 10, 64); err == nil {
			n = max(n, v)
		}
	}
	return n
}
