package residency

import (
	"context"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// Work stores an automatic work record (capsule.WriteWork): it is logged
// for the upstreams (the local archive keeps it whole), and its receipt is
// kept with the others, so the next capsule carries it to Delx. qday, when
// not nil, is the part Q-Day may take (a private working_state summary); it
// is dropped when the agent wrote its own working state after since, so
// the summary never overrides what the agent said itself more recently.
// Nothing is written while the residency is stopped (seq 0). Like a session
// end it is not refused when the outbox is full: the receipt is kept and
// the record skipped.
func (s *Store) Work(ctx context.Context, w *capsule.Work, qday *capsule.Checkpoint, since time.Time) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		if t.d.Stopped != nil {
			return 0, nil
		}
		seq := t.nextSeq()
		receipt := w.Receipt()
		t.d.Receipts = appendBounded(t.d.Receipts, keepReceipts, receipt)
		now := t.now
		if ws := t.d.WorkingState; qday != nil && ws != nil && ws.Origin == capsule.OriginExplicit && ws.UpdatedAt.After(since) {
			qday = nil
		}
		ev := Event{Seq: seq, Kind: string(capsule.WriteWork), Origin: capsule.OriginAutomatic, Summary: receipt}
		if !t.spoolFull() {
			wc := *w
			if err := t.logWrite(&capsule.Write{Seq: seq, Kind: capsule.WriteWork, Origin: capsule.OriginAutomatic, At: now,
				Work: &wc, Checkpoint: qday}); err != nil {
				return 0, err
			}
			ev.Logged, ev.Write = true, capsule.WriteWork
		}
		t.events = append(t.events, ev)
		return seq, nil
	})
}
