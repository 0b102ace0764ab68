// Package events is an agent's in-memory event feed: what the local
// `wait` long poll returns (writes, signals, file activity, upstream
// directions, delivery failures). Events are notifications, not state: the
// residency holds the state, so the feed keeps only a bounded recent window
// and starts empty after a restart.
package events

import (
	"context"
	"sync"
	"time"
)

// Event is one thing that happened to an agent.
type Event struct {
	ID      uint64    `json:"id"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // checkpoint, capsule, capsule_seal, signal, activity, commit, direction, delivery_failed
	Seq     uint64    `json:"seq,omitempty"`
	Origin  string    `json:"origin,omitempty"`
	Summary string    `json:"summary"`
	Data    any       `json:"data,omitempty"`
}

// Feed is a bounded, broadcast event feed. The zero value is not usable;
// call New.
type Feed struct {
	mu    sync.Mutex
	ring  []Event // the window is its last limit events
	limit int
	last  uint64
	wake  chan struct{} // closed and replaced on every publish
}

// New returns a feed that keeps the last limit events.
func New(limit int) *Feed {
	return &Feed{limit: limit, wake: make(chan struct{})}
}

// Publish appends events and wakes every waiter.
func (f *Feed) Publish(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	f.mu.Lock()
	for _, e := range evs {
		f.last++
		e.ID = f.last
		if e.At.IsZero() {
			e.At = time.Now().UTC()
		}
		f.ring = append(f.ring, e)
	}
	// Trimmed only once the ring holds twice the window: copying the
	// window on every publish cost more than the rest of a write's commit.
	if len(f.ring) >= 2*f.limit {
		f.ring = append(f.ring[:0:0], f.window()...)
	}
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// window is the events the feed keeps: the last limit of the ring.
func (f *Feed) window() []Event {
	return f.ring[max(0, len(f.ring)-f.limit):]
}

// Cursor is the id of the newest event; waiting after it returns only events
// published from now on.
func (f *Feed) Cursor() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Wait returns the events after the cursor `after`, waiting until at least
// one exists or ctx ends. It returns the cursor to pass next time. An
// `after` older than the window returns the whole window; one from the
// future (a feed restarted under the caller) is treated as "now".
func (f *Feed) Wait(ctx context.Context, after uint64) ([]Event, uint64) {
	for {
		f.mu.Lock()
		if after > f.last {
			after = f.last
		}
		var out []Event
		for _, e := range f.window() {
			if e.ID > after {
				out = append(out, e)
			}
		}
		wake, last := f.wake, f.last
		f.mu.Unlock()
		if len(out) > 0 {
			return out, last
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, last
		}
	}
}
