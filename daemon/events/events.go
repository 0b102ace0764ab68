// Package events is an agent's in-memory event feed: what the local
// `wait` long poll returns (writes, signals, file activity, upstream
// directions, delivery failures). Events are notifications, not state: the
// residency holds the state, so the feed keeps only a bounded recent window
// and starts empty after a restart.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/continuityd/continuityd/upstream"
)

// MaxRemoteEvent bounds one event from an upstream as the feed holds it;
// RemoteBytes bounds the upstream events the feed holds, together. An
// upstream's events are notifications the agent did not make: they give
// way to the agent's own (see Feed).
const (
	MaxRemoteEvent = 16 << 10
	RemoteBytes    = 2 << 20
)

// Event is one thing that happened to an agent.
type Event struct {
	ID      uint64    `json:"id"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // checkpoint, capsule, capsule_seal, signal, activity, commit, direction, delivery_failed, work_lost
	Seq     uint64    `json:"seq,omitempty"`
	Origin  string    `json:"origin,omitempty"`
	Summary string    `json:"summary"`
	Data    any       `json:"data,omitempty"`

	remote bool // from an upstream (Remote): gives way to the agent's own
	size   int  // what a remote event holds, in bytes
}

// Remote is an event an upstream sent (a direction from Q-Day's long
// poll), bounded before it is held: an event over MaxRemoteEvent bytes is
// replaced by a note of its size, and its text is made valid UTF-8.
func Remote(from string, raw json.RawMessage) Event {
	e := Event{Kind: "direction", Summary: "event from upstream " + from, remote: true}
	switch {
	case len(raw) > MaxRemoteEvent:
		e.Data = map[string]any{"upstream": from, "source": from,
			"omitted": fmt.Sprintf("the event is %d bytes, over the limit of %d; it is not kept", len(raw), MaxRemoteEvent)}
	case !json.Valid(raw):
		e.Data = map[string]any{"upstream": from, "source": from, "omitted": "the event is not valid JSON; it is not kept"}
	default:
		raw = upstream.ValidUTF8(raw)
		e.Data = map[string]any{"upstream": from, "source": from, "event": raw}
		e.size = len(raw)
	}
	e.size += 256 // the envelope
	return e
}

// Feed is a bounded, broadcast event feed: it keeps the last limit events,
// and of the upstreams' events at most RemoteBytes. The agent's own events
// never give way to an upstream's: when the feed is full, the oldest
// upstream events go first, and a waiter is told how many events it
// missed (Wait), so a flood from an upstream never silently pushes the
// agent's own checkpoint out. The zero value is not usable; call New.
type Feed struct {
	mu          sync.Mutex
	ring        []Event // the window is kept(ring)
	remoteBytes int     // held by the ring's remote events
	limit       int
	last        uint64
	wake        chan struct{} // closed and replaced on every publish
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
		if e.remote {
			f.remoteBytes += e.size
		}
		// Trimmed only once the ring holds twice the window: copying the
		// window on every publish cost more than the rest of a write's
		// commit.
		if len(f.ring) >= 2*f.limit || f.remoteBytes > 2*RemoteBytes {
			f.ring = f.window()
			f.remoteBytes = 0
			for _, e := range f.ring {
				if e.remote {
					f.remoteBytes += e.size
				}
			}
		}
	}
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// window is the events the feed keeps, oldest first: the newest of the
// agent's own, up to limit, then the newest upstream events that fit in
// what is left of limit and in RemoteBytes.
func (f *Feed) window() []Event {
	own := 0
	for i := len(f.ring) - 1; i >= 0 && own < f.limit; i-- {
		if !f.ring[i].remote {
			own++
		}
	}
	keep := make([]bool, len(f.ring))
	ownLeft, remoteLeft, bytesLeft := own, f.limit-own, RemoteBytes
	n := 0
	for i := len(f.ring) - 1; i >= 0 && ownLeft+remoteLeft > 0; i-- {
		e := &f.ring[i]
		switch {
		case !e.remote && ownLeft > 0:
			ownLeft--
		case e.remote && remoteLeft > 0 && e.size <= bytesLeft:
			remoteLeft--
			bytesLeft -= e.size
		default:
			continue
		}
		keep[i] = true
		n++
	}
	out := make([]Event, 0, n)
	for i, k := range keep {
		if k {
			out = append(out, f.ring[i])
		}
	}
	return out
}

// Cursor is the id of the newest event; waiting after it returns only events
// published from now on.
func (f *Feed) Cursor() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Wait returns the events after the cursor `after`, waiting until at least
// one exists or ctx ends. It returns the cursor to pass next time, and how
// many events after `after` the feed no longer holds (missed: older than
// its window, or upstream events that gave way). An `after` from the
// future (a feed restarted under the caller) is treated as "now".
func (f *Feed) Wait(ctx context.Context, after uint64) (evs []Event, cursor, missed uint64) {
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
			return out, last, last - after - uint64(len(out))
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, last, last - after
		}
	}
}
