// Package pacer runs an operation after changes, at most once an
// interval, leading edge first: a change that finds the last run an
// interval or more ago is acted on at once, in the wake-up that brought
// it, and changes that come sooner wait for the interval's end and are
// acted on together. A trailing debounce would instead give every change
// a wake-up of its own, which on a quiet machine costs more than the
// small write it times.
package pacer

import (
	"context"
	"time"
)

// Run calls do after each kick, its calls starting at least every apart,
// until ctx ends.
// Kicks that come while it waits or runs are folded into the next call.
// kicks is meant to be buffered 1, its senders never blocking; a last
// call on the way out, if one is owed, is the caller's.
func Run(ctx context.Context, kicks <-chan struct{}, every time.Duration, do func()) {
	run(ctx, kicks, every, do, clock{now: time.Now, after: time.After})
}

// clock is the time run reads and waits on (tests hold it).
type clock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

func run(ctx context.Context, kicks <-chan struct{}, every time.Duration, do func(), c clock) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-kicks:
		}
		if !last.IsZero() {
			if wait := last.Add(every).Sub(c.now()); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-c.after(wait):
				}
			}
		}
		last = c.now()
		do()
	}
}
