package pacer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// heldClock is a clock whose waits the test ends: each wait is announced
// on asked, with how long it is, and ends when the test sends on fire.
type heldClock struct {
	now   atomic.Int64 // unix nanoseconds
	asked chan time.Duration
	fire  chan time.Time
}

func newHeldClock() *heldClock {
	h := &heldClock{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
	h.now.Store(time.Unix(1_000_000, 0).UnixNano())
	return h
}

// advance moves the clock on by d and returns the new time.
func (h *heldClock) advance(d time.Duration) time.Time {
	return time.Unix(0, h.now.Add(int64(d)))
}

func (h *heldClock) clock() clock {
	return clock{
		now: func() time.Time { return time.Unix(0, h.now.Load()) },
		after: func(d time.Duration) <-chan time.Time {
			h.asked <- d
			return h.fire
		},
	}
}

// heldRun is run going on a held clock, told of its calls.
type heldRun struct {
	clock *heldClock
	kicks chan struct{}
	calls atomic.Int32
	stop  func() // cancels run and waits for it to return
}

func startHeld(every time.Duration) *heldRun {
	r := &heldRun{clock: newHeldClock(), kicks: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, r.kicks, every, func() { r.calls.Add(1) }, r.clock.clock())
	}()
	r.stop = func() { cancel(); <-done }
	return r
}

// TestRunLeadingEdge: the first change is acted on at once; one that
// comes within the interval waits for its end (the wait asked for is
// what is left of it), and the changes made meanwhile are acted on in
// one call.
func TestRunLeadingEdge(t *testing.T) {
	r := startHeld(10 * time.Second)
	defer r.stop()
	h, kicks, calls := r.clock, r.kicks, &r.calls

	kicks <- struct{}{}
	testwait.Until(t, func() string { return "the first change not acted on" }, func() bool { return calls.Load() == 1 })

	// Three seconds later, two changes: one wait for the seven left.
	h.advance(3 * time.Second)
	kicks <- struct{}{}
	if d := <-h.asked; d != 7*time.Second {
		t.Fatalf("waited %v after a change 3 s into a 10 s interval, want 7s", d)
	}
	kicks <- struct{}{} // folded into the call the wait ends in
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls before the interval's end, want 1", n)
	}
	h.fire <- h.advance(7 * time.Second)
	testwait.Until(t, func() string { return "the held changes not acted on" }, func() bool { return calls.Load() == 2 })

	// The folded kick: the interval is not over, so another wait.
	if d := <-h.asked; d != 10*time.Second {
		t.Fatalf("waited %v for the folded change, want 10s", d)
	}
	h.fire <- h.advance(10 * time.Second)
	testwait.Until(t, func() string { return "the folded change not acted on" }, func() bool { return calls.Load() == 3 })

	// An interval later, a change is acted on at once again.
	h.advance(time.Minute)
	kicks <- struct{}{}
	testwait.Until(t, func() string { return "a change after a quiet interval not acted on" }, func() bool { return calls.Load() == 4 })
	select {
	case d := <-h.asked:
		t.Fatalf("waited %v for a change that came after a quiet interval", d)
	default:
	}
}

// TestRunStopsWhileWaiting: a cancelled context ends Run in its wait,
// without the call.
func TestRunStopsWhileWaiting(t *testing.T) {
	r := startHeld(time.Hour)
	r.kicks <- struct{}{}
	testwait.Until(t, func() string { return "the first change not acted on" }, func() bool { return r.calls.Load() == 1 })
	r.kicks <- struct{}{}
	<-r.clock.asked
	r.stop()
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1: the held change is the caller's to act on", n)
	}
}

// TestRunRealClock: Run itself, on the real clock, acts on a change at
// once.
func TestRunRealClock(t *testing.T) {
	kicks := make(chan struct{}, 1)
	called := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, kicks, time.Hour, func() { called <- struct{}{} })
	}()
	kicks <- struct{}{}
	select {
	case <-called:
	case <-time.After(testwait.Limit):
		t.Fatal("a change not acted on")
	}
	cancel()
	<-done
}
