package residency

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// Signal stores a context signal (already checked by the guard): it updates
// the context state and is shown in since_last_visit. Signals are not shipped
// upstream; the checkpoint policy turns them into checkpoints.
func (s *Store) Signal(ctx context.Context, sig *capsule.Signal) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		seq := t.nextSeq()
		now := t.now
		sg := *sig
		sg.At = now
		c := &t.d.Context
		switch sg.Kind {
		case capsule.SignalContext:
			c.UsedFraction, c.Via = sg.UsedFraction, sg.Via
		case capsule.SignalCompaction:
			// A compaction may be reported before and after; count it once.
			if sg.Phase == "pre" || t.d.LastCompaction != "pre" {
				c.Compactions++
			}
			t.d.LastCompaction = sg.Phase
			if sg.Phase == "post" {
				c.UsedFraction, c.Via = nil, "" // unknown until the next usage report
			}
		case capsule.SignalSession:
			c.Session = sg.Event
		}
		if sg.SessionID != "" {
			if c.SessionID != "" && sg.SessionID != c.SessionID && sg.Kind != capsule.SignalContext {
				// Another session: its context is its own, unknown until
				// it is reported, not the last session's.
				c.UsedFraction, c.Via = nil, ""
			}
			c.SessionID = sg.SessionID
		}
		c.UpdatedAt = &now
		summary := signalSummary(&sg)
		// Activity is frequent and says little; it moves the clock but is not
		// listed one by one.
		if sg.Kind != capsule.SignalActivity {
			t.d.Since.Signals = appendBounded(t.d.Since.Signals, keepSinceSignals,
				seqSignal{Seq: seq, Note: capsule.SignalNote{At: now, Kind: sg.Kind, Summary: summary}})
		}
		t.events = append(t.events, Event{Seq: seq, Kind: "signal", Summary: summary, Signal: &sg})
		// A session's end travels upstream (Delx closes its session then),
		// carrying the latest capsule. Unlike a checkpoint it is not refused
		// when the outbox is full: it is skipped, and the state it reports
		// is already stored.
		if sg.Kind == capsule.SignalSession && sg.Event == "end" && !t.spoolFull() {
			w := &capsule.Write{Seq: seq, Kind: capsule.WriteSessionEnd, Origin: capsule.OriginAutomatic, At: now,
				SessionID: sg.SessionID, Reason: sg.Reason}
			if t.capsule != nil {
				c := t.capsule.Capsule
				w.Capsule = &c
			}
			if err := t.logWrite(w); err != nil {
				return 0, err
			}
			t.events[len(t.events)-1].Logged = true
		}
		return seq, nil
	})
}

// signalSummary is a one-line description of a signal for people.
func signalSummary(s *capsule.Signal) string {
	var b strings.Builder
	b.WriteString(s.Kind)
	switch s.Kind {
	case capsule.SignalContext:
		if s.UsedFraction != nil {
			fmt.Fprintf(&b, " %.0f%% used", *s.UsedFraction*100)
		}
	case capsule.SignalCompaction:
		b.WriteString(" " + s.Phase)
		if s.Trigger != "" {
			b.WriteString(" (" + s.Trigger + ")")
		}
	case capsule.SignalSession, capsule.SignalActivity:
		if s.Event != "" {
			b.WriteString(" " + s.Event)
		}
		if s.Source != "" {
			b.WriteString(" source=" + s.Source)
		}
		if s.Reason != "" {
			b.WriteString(" reason=" + s.Reason)
		}
	}
	return b.String()
}

// NoteActivity records work-directory activity for since_last_visit: a few
// example paths (already redacted by the caller, most recent first), each
// listed once with how many times it changed, and how many changed. It is
// bookkeeping nobody waits for (lazy): it rides on the next write (the
// work record the activity leads to) or the next flush. A crash loses at
// most the last flush delay of it; the next snapshot still holds those
// changes.
func (s *Store) NoteActivity(paths []string, count int) {
	s.lazy(func(t *txn) (uint64, error) { return t.noteActivity(paths, count), nil })
}

func (t *txn) noteActivity(paths []string, count int) uint64 {
	seq := t.nextSeq()
	sp := &t.d.Since
	sp.notePaths(seq, paths)
	sp.PathsTotal += count
	t.events = append(t.events, Event{Seq: seq, Kind: "activity", Summary: fmt.Sprintf("%d paths changed", count)})
	return seq
}

// AddReceipt records a receipt (a commit, a deploy id), already redacted; a
// commit also shows in since_last_visit.
func (s *Store) AddReceipt(ctx context.Context, receipt string, isCommit bool) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		seq := t.nextSeq()
		t.d.Receipts = appendBounded(t.d.Receipts, keepReceipts, receipt)
		kind := "receipt"
		if isCommit {
			kind = "commit"
			t.d.Since.Commits = appendBounded(t.d.Since.Commits, keepSinceCommits, seqString{Seq: seq, V: receipt})
		}
		t.events = append(t.events, Event{Seq: seq, Kind: kind, Summary: receipt})
		return seq, nil
	})
}

// AddHeadMove records HEAD moving without a new commit (a branch switch, a
// reset, a rebase): its summary, already redacted, becomes a receipt, and
// the move shows in since_last_visit.head until the agent's next visit.
func (s *Store) AddHeadMove(ctx context.Context, m capsule.HeadMove) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		seq := t.nextSeq()
		if m.At.IsZero() {
			m.At = t.now
		}
		t.d.Receipts = appendBounded(t.d.Receipts, keepReceipts, m.Summary)
		t.d.Since.Head = appendBounded(t.d.Since.Head, keepSinceHead, seqHead{Seq: seq, Move: m})
		t.events = append(t.events, Event{Seq: seq, Kind: "head", Summary: m.Summary})
		return seq, nil
	})
}

// SetPlan records the agent's plan as its transcript states it (the whole
// plan; empty clears it). An unchanged plan writes nothing (seq 0).
func (s *Store) SetPlan(ctx context.Context, steps []capsule.PlanStep) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		if slices.Equal(t.d.Plan, steps) && (len(steps) > 0 || t.d.PlanAt != nil) {
			return 0, nil
		}
		seq := t.nextSeq()
		t.d.Plan = slices.Clone(steps)
		at := t.now
		t.d.PlanAt = &at
		summary := fmt.Sprintf("plan: %d steps", len(steps))
		if cur, ok := capsule.CurrentPlanStep(steps); ok {
			summary += "; now: " + cur.Step
		}
		t.events = append(t.events, Event{Seq: seq, Kind: "plan", Origin: capsule.OriginAutomatic, Summary: summary})
		return seq, nil
	})
}

// NoteRefusal shows an automatic input that failed the guards (a handoff
// file, say) in resume until the same source is accepted again.
func (s *Store) NoteRefusal(ctx context.Context, source string, e *capsule.Error) error {
	_, err := s.submit(ctx, func(t *txn) (uint64, error) {
		rs := keepAfter(t.d.Refused, func(r capsule.Refusal) bool { return r.Source != source })
		if e != nil {
			rs = appendBounded(rs, keepRefusals, capsule.Refusal{Source: source, At: t.now, Error: *e})
		}
		t.d.Refused = rs
		return 0, nil
	})
	return err
}
