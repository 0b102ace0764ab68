package residency

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/capsule"
)

// Resume returns the agent's residency as the resume document shows it
// (without the upstream view, which the daemon adds). It changes nothing:
// a read that is the agent's own visit is Visit.
func (s *Store) Resume() capsule.Resume {
	r, _ := s.Visit()
	return r
}

// Visit is what one read of the resume showed of since_last_visit: the
// mark Visited clears up to. The zero Visit clears nothing.
type Visit struct {
	mark *visitMark
	at   time.Time
}

// At is when the visit read the resume: what changed after it is news at
// the next one.
func (v Visit) At() time.Time { return v.at }

// Visit returns the resume document and the visit it is. Reading resets
// nothing: only the caller knows whether the agent received the answer (a
// client that gave up before it arrived must find the same news next
// time), and it calls Visited once it did.
func (s *Store) Visit() (capsule.Resume, Visit) {
	s.mu.RLock()
	d, rec := s.cur, s.capsule
	s.mu.RUnlock()
	return resumeOf(s.agent, d, rec), Visit{mark: markVisit(d), at: time.Now()}
}

// Visited clears the since-last-visit accumulators that the visit v was
// shown, in the background and precisely (anything that landed after the
// read stays for the next visit). Losing that reset in a crash only shows
// the same news twice.
func (s *Store) Visited(v Visit) {
	if v.mark == nil {
		return
	}
	m := *v.mark
	s.lazy(func(t *txn) (uint64, error) {
		t.visited(m)
		return 0, nil
	})
}

// markVisit is what a visit to the published document d sees.
func markVisit(d *doc) *visitMark {
	return &visitMark{seq: d.Seq, writes: d.Since.WritesTotal, paths: d.Since.PathsTotal, shown: d.Since.Paths}
}

// visited clears what the visit m was shown.
func (t *txn) visited(m visitMark) { t.d.Since.resetTo(m, t.now) }

// resumeOf is the residency part of the resume document for one published
// state.
func resumeOf(agent string, d *doc, rec *capsule.CapsuleRecord) capsule.Resume {
	r := capsule.Resume{
		Agent:          agent,
		Seq:            d.Seq,
		Focus:          d.Focus,
		FocusUpdatedAt: d.FocusUpdatedAt,
		WorkingState:   d.WorkingState,
		Commitments:    orEmpty(d.Commitments),
		Decisions:      orEmpty(d.Decisions),
		PublicStatus:   d.PublicStatus,
		Stopped:        d.Stopped,
		Receipts:       orEmpty(d.Receipts),
		Plan:           orEmpty(d.Plan),
		PlanUpdatedAt:  d.PlanAt,
		SinceLastVisit: d.Since.wire(),
		Context:        d.Context,
		LastWriteAt:    d.LastWriteAt,
		Refused:        orEmpty(d.Refused),
		Upstreams:      []capsule.UpstreamState{},
		Degraded:       []string{},
		Directions:     []json.RawMessage{},
	}
	if rec != nil {
		c := *rec
		r.Capsule = &c
	}
	return r
}

// StateJSON is Resume() encoded as JSON (no HTML escaping, no
// trailing newline), as a checkpoint answer carries it, less "snapshot"
// and "upstreams": the residency does not know them (the agent adds them
// to a resume), and a null and an empty list would say there are none. The encoding is
// made once per published state: for a checkpoint from the API, it is
// started by the commit while the write-ahead log syncs, and the callers
// answered by that commit wait for it here (the commit itself does not:
// the next batch must not queue behind an encoding). Concurrent writers
// answered by one commit share it.
func (s *Store) StateJSON() ([]byte, error) {
	s.mu.RLock()
	d, rec := s.cur, s.capsule
	s.mu.RUnlock()
	if e := s.stateJSON.Load(); e != nil && e.d == d && e.c == rec {
		<-e.done
		return e.raw, e.err
	}
	e := encodeState(s.agent, d, rec, &s.stateLen)
	<-e.done
	if e.err == nil {
		s.stateJSON.Store(e)
	}
	return e.raw, e.err
}

// encodedState is the JSON of one published state, ready once done is
// closed.
type encodedState struct {
	d    *doc
	c    *capsule.CapsuleRecord
	done chan struct{}
	raw  []byte
	err  error
}

// encodeState encodes the state in the calling goroutine.
func encodeState(agent string, d *doc, rec *capsule.CapsuleRecord, size *atomic.Int64) *encodedState {
	e := newEncodedState(d, rec)
	e.encode(agent, size)
	return e
}

// newEncodedState returns the encoding of a state, to be made by whoever
// calls encode; waiters block on done until then.
func newEncodedState(d *doc, rec *capsule.CapsuleRecord) *encodedState {
	return &encodedState{d: d, c: rec, done: make(chan struct{})}
}

// encode encodes the state; size is the length of the last encoding, which
// it updates, for the buffer to fit the first time (nil: no estimate).
func (e *encodedState) encode(agent string, size *atomic.Int64) {
	defer close(e.done)
	st := savedState{Resume: resumeOf(agent, e.d, e.c)}
	var buf []byte
	if size != nil {
		buf = make([]byte, 0, size.Load()+512)
	}
	if e.raw, e.err = encodeSavedState(&st, buf); size != nil && e.err == nil {
		size.Store(int64(len(e.raw)))
	}
}

// savedState is a Resume without the fields only the agent fills: the
// empty fields here, shallower than the Resume's own, hide them.
type savedState struct {
	capsule.Resume
	Snapshot  *struct{}  `json:"snapshot,omitempty"`
	Upstreams []struct{} `json:"upstreams,omitempty"`
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return slices.Clone(xs)
}

// Pending returns up to max logged writes after the upstream's cursor and
// after `after` (what the caller has delivered but may not see acknowledged
// yet), oldest first.
func (s *Store) Pending(upstream string, after uint64, max int) ([]capsule.Write, error) {
	// Copy the entries while holding the transaction and decode them after:
	// a read holds up every commit meanwhile.
	var raws [][]byte
	err := s.view(func(tx *bolt.Tx) error {
		from := maxU(cursorIn(tx, upstream), after) + 1
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.Seek(u64(from)); k != nil && len(raws) < max; k, v = c.Next() {
			raws = append(raws, slices.Clone(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]capsule.Write, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("decode log entry: %w", err)
		}
	}
	return out, nil
}

// PendingCount counts the logged writes after the upstream's cursor and
// after `after`, from memory: status and resume ask it for every upstream.
func (s *Store) PendingCount(upstream string, after uint64) (int, error) {
	s.mu.RLock()
	logged, from := s.logged, max(s.heads[upstream], after)
	s.mu.RUnlock()
	i, _ := slices.BinarySearch(logged, from+1)
	return len(logged) - i, nil
}

// Acknowledged returns the highest sequence number the upstream has taken.
func (s *Store) Acknowledged(upstream string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.heads[upstream]
}

// LogHead returns the highest sequence number in the log.
func (s *Store) LogHead() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logHead
}

func cursorIn(tx *bolt.Tx, upstream string) uint64 {
	if v := tx.Bucket(bucketCursors).Get([]byte(upstream)); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// cursor is the upstream's acknowledged seq as the batch sees it.
func (t *txn) cursor(upstream string) uint64 {
	if v := t.kv.Get(bucketCursors, []byte(upstream)); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Ack records that the upstream has taken every logged write up to seq, and
// prunes log entries every upstream has taken. It does not wait: the ack
// rides on the next commit (see lazyDelay); if a crash loses it, the writes
// are sent again under the same Idempotency-Key, which the contract allows.
// Pending, PendingCount and Acknowledged reflect it once committed.
func (s *Store) Ack(upstream string, seq uint64, upstreams []string) {
	s.lazy(func(t *txn) (uint64, error) { return 0, t.ack(upstream, seq, upstreams) })
}

// ack moves the upstream's cursor to seq and prunes the log below the
// slowest upstream's cursor.
func (t *txn) ack(upstream string, seq uint64, upstreams []string) error {
	if old := t.cursor(upstream); seq <= old {
		return nil
	}
	if err := t.put(bucketCursors, []byte(upstream), u64(seq)); err != nil {
		return err
	}
	t.acked[upstream] = seq
	low := seq
	for _, u := range upstreams {
		low = min(low, t.cursor(u))
	}
	// Collect first: deleting under a live cursor skips keys.
	drop := t.kv.Keys(bucketLog, nil, func(k []byte) bool { return binary.BigEndian.Uint64(k) <= low })
	for _, k := range drop {
		if err := t.delete(bucketLog, k); err != nil {
			return err
		}
	}
	i, _ := slices.BinarySearch(t.logged, low+1)
	t.logged = t.logged[i:]
	return t.shipUnshipped()
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// ResidencyID is the random id this residency was created with; it makes
// Idempotency-Keys unique across residencies.
func (s *Store) ResidencyID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.ResidencyID
}
