package residency

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// Checkpoint stores a checkpoint that has passed the stateless guards, after
// the checks that need the stored state: a stopped residency (409
// RESIDENCY_STOPPED), unknown commitment ids, and the open-commitment limit.
// It returns the write's sequence number once it is on disk.
func (s *Store) Checkpoint(ctx context.Context, cp *capsule.Checkpoint, origin capsule.Origin) (uint64, error) {
	return s.checkpointIf(ctx, cp, origin, nil)
}

// CheckpointIf is Checkpoint on condition that the state is still at
// sequence number ifSeq (what a Resume returned): otherwise nothing is
// stored and the error is capsule.ErrStaleState.
func (s *Store) CheckpointIf(ctx context.Context, cp *capsule.Checkpoint, origin capsule.Origin, ifSeq uint64) (uint64, error) {
	return s.checkpointIf(ctx, cp, origin, &ifSeq)
}

// checkpointIf stores cp, if ifSeq is nil or the state is still there.
func (s *Store) checkpointIf(ctx context.Context, cp *capsule.Checkpoint, origin capsule.Origin, ifSeq *uint64) (uint64, error) {
	// Encoded here, in the caller's goroutine, not in the commit.
	cpJSON, err := encodeCheckpoint(cp)
	if err != nil {
		return 0, err
	}
	return s.eng.Submit(ctx, func(t *txn) (uint64, error) {
		if ifSeq != nil && t.d.Seq != *ifSeq {
			return 0, capsule.ErrStaleState
		}
		return t.checkpoint(cp, origin, cpJSON)
	}, origin == capsule.OriginExplicit) // the API answers with the state
}

func (t *txn) checkpoint(cp *capsule.Checkpoint, origin capsule.Origin, cpJSON []byte) (uint64, error) {
	d := t.d
	if d.Stopped != nil && !cp.ResumeResidency {
		return 0, capsule.Refuse(capsule.CodeResidencyStopped, "",
			"the residency was stopped (%q); only a checkpoint with resume_residency: true lifts it", d.Stopped.Reason)
	}
	if err := checkCommitmentOps(d, cp.Commitments); err != nil {
		return 0, err
	}
	// A full outbox refuses what the agent asked for, and keeps coalescing
	// what the daemon derived (state only: it carries no decision or
	// commitment that would be lost by merging).
	full := t.spoolFull()
	if full && (origin == capsule.OriginExplicit || cp.Decide != nil || cp.Commitments != nil || cp.Stop != nil || cp.ResumeResidency) {
		return 0, spoolFullError(t.maxPending)
	}

	// Everything below succeeds: mutate.
	seq := t.nextSeq()
	now := t.now
	if cp.ResumeResidency {
		d.Stopped = nil
	}
	if cp.Stop != nil {
		// A stop records itself and ignores every other field.
		d.Stopped = &capsule.StopRecord{Reason: cp.Stop.Reason, At: now}
	} else {
		if cp.Focus != nil {
			d.Focus, d.FocusUpdatedAt, d.FocusOrigin = *cp.Focus, &now, origin
		}
		if ws := cp.WorkingState; ws != nil {
			rec := capsule.WorkingStateRecord{}
			if d.WorkingState != nil {
				rec = *d.WorkingState
			}
			if ws.NextAction != nil {
				rec.NextAction = *ws.NextAction
			}
			if ws.LastResult != nil {
				rec.LastResult = *ws.LastResult
			}
			if ws.ResultRef.Set {
				rec.ResultRef = ws.ResultRef.Ptr()
			}
			if ws.WaitingFor.Set {
				rec.WaitingFor = ws.WaitingFor.Ptr()
			}
			rec.UpdatedAt, rec.Origin = now, origin
			d.WorkingState = &rec
		}
		if cp.Decide != nil {
			d.Decisions = appendBounded(d.Decisions, keepDecisions, capsule.DecisionRecord{Decision: *cp.Decide, At: now, Seq: seq})
		}
		if cp.PublicStatus != nil {
			d.PublicStatus = &capsule.PublicStatusRecord{PublicStatus: *cp.PublicStatus, UpdatedAt: now}
		}
		if err := t.applyCommitmentOps(seq, cp.Commitments); err != nil {
			return 0, err
		}
	}
	d.Since.WritesTotal++
	if full {
		d.Unshipped = true
		t.events = append(t.events, Event{Seq: seq, Kind: string(capsule.WriteCheckpoint), Origin: origin,
			Summary: summarizeCheckpoint(cp) + " (stored; will ship coalesced once the outbox has room)"})
		return seq, nil
	}
	w := &capsule.Write{Seq: seq, Kind: capsule.WriteCheckpoint, Origin: origin, At: now, Checkpoint: cp}
	if err := t.logWriteEncoded(w, cpJSON); err != nil {
		return 0, err
	}
	t.events = append(t.events, Event{Seq: seq, Kind: string(capsule.WriteCheckpoint), Origin: origin,
		Summary: summarizeCheckpoint(cp), Logged: true, Write: capsule.WriteCheckpoint})
	return seq, nil
}

// checkCommitmentOps checks close/drop ids against the open commitments and
// the open count after the operations, without changing anything.
func checkCommitmentOps(d *doc, ops *capsule.CommitmentOps) error {
	if ops == nil {
		return nil
	}
	open := map[string]bool{}
	for _, c := range d.Commitments {
		if c.Status == capsule.CommitmentOpen {
			open[c.ID] = true
		}
	}
	count := len(open)
	for i, c := range ops.Close {
		if !open[c.ID] {
			return capsule.Refuse(capsule.CodeUnknownCommitment, fmt.Sprintf("commitments.close[%d].id", i),
				"no open commitment has id %q", c.ID)
		}
		count--
	}
	for i, c := range ops.Drop {
		if !open[c.ID] {
			return capsule.Refuse(capsule.CodeUnknownCommitment, fmt.Sprintf("commitments.drop[%d].id", i),
				"no open commitment has id %q", c.ID)
		}
		count--
	}
	if count+len(ops.Open) > guard.MaxOpenCommitments {
		return capsule.Refuse(capsule.CodeTooManyOpenLoops, "commitments.open",
			"%d commitments are open and this write opens %d more; at most %d may be open: close or drop one first",
			len(open), len(ops.Open), guard.MaxOpenCommitments)
	}
	return nil
}

// applyCommitmentOps closes and drops first, then opens, so one write can
// replace a commitment without passing the limit.
func (t *txn) applyCommitmentOps(seq uint64, ops *capsule.CommitmentOps) error {
	if ops == nil {
		return nil
	}
	d, now := t.d, t.now
	for _, c := range ops.Close {
		if err := t.finishCommitment(c.ID, capsule.CommitmentClosed, seq, c.Evidence); err != nil {
			return err
		}
	}
	for _, c := range ops.Drop {
		if err := t.finishCommitment(c.ID, capsule.CommitmentDropped, seq, c.Reason); err != nil {
			return err
		}
	}
	for _, o := range ops.Open {
		d.NextCommitment++
		d.Commitments = append(d.Commitments, capsule.Commitment{
			ID:       fmt.Sprintf("c_%d", d.NextCommitment),
			Title:    o.Title,
			Status:   capsule.CommitmentOpen,
			OpenedAt: now,
			History:  []capsule.CommitmentEvent{{At: now, Action: "open", Seq: seq}},
		})
	}
	// Keep the open ones and the most recent finished ones in the document;
	// every finished one is also in the commitments bucket for good.
	var open, finished []capsule.Commitment
	for _, c := range d.Commitments {
		if c.Status == capsule.CommitmentOpen {
			open = append(open, c)
		} else {
			finished = append(finished, c)
		}
	}
	if len(finished) > keepDoneCommits {
		finished = finished[len(finished)-keepDoneCommits:]
	}
	d.Commitments = append(open, finished...)
	return nil
}

func (t *txn) finishCommitment(id, status string, seq uint64, detail string) error {
	for i := range t.d.Commitments {
		c := &t.d.Commitments[i]
		if c.ID != id || c.Status != capsule.CommitmentOpen {
			continue
		}
		c.Status = status
		action := "close"
		if status == capsule.CommitmentClosed {
			c.Evidence = detail
		} else {
			action, c.Reason = "drop", detail
		}
		c.History = append(c.History, capsule.CommitmentEvent{At: t.now, Action: action, Seq: seq, Detail: detail})
		raw, err := json.Marshal(c)
		if err != nil {
			return err
		}
		return t.put(bucketDone, []byte(c.ID), raw)
	}
	return fmt.Errorf("commitment %s vanished between check and apply", id)
}

func summarizeCheckpoint(cp *capsule.Checkpoint) string {
	if cp.Stop != nil {
		return "stop"
	}
	parts := make([]string, 0, 6)
	if cp.ResumeResidency {
		parts = append(parts, "resume_residency")
	}
	if cp.Focus != nil {
		parts = append(parts, "focus")
	}
	if cp.WorkingState != nil {
		parts = append(parts, "working_state")
	}
	if cp.Decide != nil {
		parts = append(parts, "decide")
	}
	if cp.PublicStatus != nil {
		parts = append(parts, "public_status")
	}
	if c := cp.Commitments; c != nil && !c.IsEmpty() {
		parts = append(parts, fmt.Sprintf("commitments(+%d ✓%d ✗%d)", len(c.Open), len(c.Close), len(c.Drop)))
	}
	return strings.Join(parts, ", ")
}
