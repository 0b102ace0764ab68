package residency

import (
	"context"

	"github.com/continuityd/continuityd/capsule"
)

// PutCapsule stores c (already validated by the guard) as the agent's latest
// capsule; sealed tells a capsule the daemon built (POST /v1/capsule/seal)
// from one the agent wrote. Both are logged for the upstreams.
func (s *Store) PutCapsule(ctx context.Context, c *capsule.Capsule, sealed bool, origin capsule.Origin) (uint64, error) {
	return s.submit(ctx, func(t *txn) (uint64, error) {
		full := t.spoolFull()
		if full && origin == capsule.OriginExplicit {
			return 0, spoolFullError(t.maxPending)
		}
		seq := t.nextSeq()
		kind := capsule.WriteCapsule
		if sealed {
			kind = capsule.WriteSeal
		}
		cc := *c
		t.capsule = &capsule.CapsuleRecord{Capsule: cc, StoredAt: t.now, Sealed: sealed, Seq: seq}
		t.capsuleChanged = true
		t.d.CapsuleSeq = seq
		t.d.Since.WritesTotal++
		if full {
			t.d.UnshippedCapsule = true
			t.events = append(t.events, Event{Seq: seq, Kind: string(kind), Origin: origin, Summary: "capsule stored; will ship once the outbox has room"})
			return seq, nil
		}
		if err := t.logWrite(&capsule.Write{Seq: seq, Kind: kind, Origin: origin, At: t.now, Capsule: &cc}); err != nil {
			return 0, err
		}
		summary := "capsule stored"
		if sealed {
			summary = "capsule sealed"
		}
		t.events = append(t.events, Event{Seq: seq, Kind: string(kind), Origin: origin, Summary: summary, Logged: true, Write: kind})
		return seq, nil
	})
}

// Capsule returns the latest capsule, or nil when none was stored.
func (s *Store) Capsule() *capsule.CapsuleRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.capsule == nil {
		return nil
	}
	c := *s.capsule
	return &c
}
