package residency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

var bucketDead = []byte("deadletter") // upstream \x00 seq → DeadLetter

// DeadLetter is a write an upstream refused for good (a 4xx other than
// 408/429): internal/ops declares it, as GET /v1/deadletter lists it.
type DeadLetter = ops.DeadLetter

// ErrNoDeadLetter is returned for a dead letter that does not exist.
var ErrNoDeadLetter = errors.New("no such dead letter")

func deadKey(upstream string, seq uint64) []byte {
	return append(append([]byte(upstream), 0), u64(seq)...)
}

// Reject moves writes the upstream refused for good into its dead letter
// and moves the upstream's cursor past them, in one transaction.
func (s *Store) Reject(ctx context.Context, upstream string, ws []capsule.Write, reason string, upstreams []string) error {
	if len(ws) == 0 {
		return nil
	}
	_, err := s.submit(ctx, func(t *txn) (uint64, error) { return 0, t.reject(upstream, ws, reason, upstreams) })
	return err
}

// reject is Reject in a batch: a write already in the dead letter is
// replaced, and counted once.
func (t *txn) reject(upstream string, ws []capsule.Write, reason string, upstreams []string) error {
	for _, w := range ws {
		raw, err := json.Marshal(DeadLetter{Upstream: upstream, Write: w, Error: reason, At: t.now, Attempts: 1})
		if err != nil {
			return err
		}
		if t.kv.Get(bucketDead, deadKey(upstream, w.Seq)) == nil {
			t.d.DeadLetters[upstream]++
		}
		if err := t.put(bucketDead, deadKey(upstream, w.Seq), raw); err != nil {
			return err
		}
	}
	return t.ack(upstream, ws[len(ws)-1].Seq, upstreams)
}

// DeadLetters lists an upstream's dead letter ("" lists every upstream's).
func (s *Store) DeadLetters(upstream string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDead).Cursor()
		prefix := []byte(nil)
		if upstream != "" {
			prefix = append([]byte(upstream), 0)
		}
		for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			var d DeadLetter
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode dead letter: %w", err)
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// DeadCount is how many writes sit in the upstream's dead letter.
func (s *Store) DeadCount(upstream string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.DeadLetters[upstream]
}

// RetryDead marks a dead letter for another attempt (seq 0: all of the
// upstream's).
func (s *Store) RetryDead(ctx context.Context, upstream string, seq uint64) (int, error) {
	return s.editDead(ctx, upstream, seq, func(k []byte, d *DeadLetter, t *txn) error {
		d.Retry = true
		raw, err := json.Marshal(d)
		if err != nil {
			return err
		}
		return t.put(bucketDead, k, raw)
	})
}

// DiscardDead removes a dead letter for good (seq 0: all of the upstream's).
func (s *Store) DiscardDead(ctx context.Context, upstream string, seq uint64) (int, error) {
	return s.editDead(ctx, upstream, seq, func(k []byte, d *DeadLetter, t *txn) error {
		t.d.DeadLetters[upstream]--
		return t.delete(bucketDead, k)
	})
}

func (s *Store) editDead(ctx context.Context, upstream string, seq uint64, edit func([]byte, *DeadLetter, *txn) error) (int, error) {
	var n int
	_, err := s.submit(ctx, func(t *txn) (uint64, error) {
		var err error
		n, err = t.editDead(upstream, seq, edit)
		return 0, err
	})
	return n, err
}

// editDead applies edit to one dead letter of the upstream's (seq 0:
// each of them) and says to how many.
func (t *txn) editDead(upstream string, seq uint64, edit func([]byte, *DeadLetter, *txn) error) (int, error) {
	var keys [][]byte
	if seq != 0 {
		if t.kv.Get(bucketDead, deadKey(upstream, seq)) == nil {
			return 0, capsule.Refuse(capsule.CodeNotFound, "seq",
				"upstream %s has no dead letter with seq %d", upstream, seq)
		}
		keys = append(keys, deadKey(upstream, seq))
	} else {
		keys = t.kv.Keys(bucketDead, append([]byte(upstream), 0), nil)
	}
	for i, k := range keys {
		var d DeadLetter
		if err := json.Unmarshal(t.kv.Get(bucketDead, k), &d); err != nil {
			return i, err
		}
		if err := edit(k, &d, t); err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// Retries returns the upstream's dead letters marked for retry, oldest first.
func (s *Store) Retries(upstream string) ([]DeadLetter, error) {
	all, err := s.DeadLetters(upstream)
	var out []DeadLetter
	for _, d := range all {
		if d.Retry {
			out = append(out, d)
		}
	}
	return out, err
}

// RetryDone records the outcome of a dead letter's retry: delivered (it
// leaves the dead letter) or refused again (it stays, unmarked, with the new
// error).
func (s *Store) RetryDone(ctx context.Context, upstream string, seq uint64, failure string) error {
	_, err := s.submit(ctx, func(t *txn) (uint64, error) { return 0, t.retryDone(upstream, seq, failure) })
	return err
}

func (t *txn) retryDone(upstream string, seq uint64, failure string) error {
	k := deadKey(upstream, seq)
	raw := t.kv.Get(bucketDead, k)
	if raw == nil {
		return nil // discarded meanwhile
	}
	if failure == "" {
		t.d.DeadLetters[upstream]--
		return t.delete(bucketDead, k)
	}
	var d DeadLetter
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	d.Retry, d.Error, d.At = false, failure, t.now
	d.Attempts++
	out, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return t.put(bucketDead, k, out)
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}
