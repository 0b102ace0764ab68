package watch

import (
	"slices"
	"strings"
	"time"
)

// settleDue reports the paths that had no change for Settle and sets the
// timer for the next one due.
func (w *Watcher) settleDue(t *loopTimers) {
	now := time.Now()
	var due []Settled
	next := time.Duration(-1)
	for p, last := range w.settling {
		if wait := last.Add(w.o.Settle).Sub(now); wait > 0 {
			if next < 0 || wait < next {
				next = wait
			}
			continue
		}
		due = append(due, Settled{Path: p, Last: last})
		delete(w.settling, p)
	}
	if len(due) > 0 {
		slices.SortFunc(due, func(a, b Settled) int { return strings.Compare(a.Path, b.Path) })
		w.o.OnSettled(due)
	}
	if next >= 0 {
		t.settle.Reset(next)
		t.settleC = t.settle.C
	}
}

// loopTimers are Run's timers; a nil channel is a timer not running.
type loopTimers struct {
	sum, maint, pause, settle     *time.Timer
	sumC, maintC, pauseC, settleC <-chan time.Time
}

func newLoopTimers() *loopTimers {
	stopped := func() *time.Timer {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}
	return &loopTimers{sum: stopped(), maint: stopped(), pause: stopped(), settle: stopped()}
}

// arm starts the summary and maintenance timers when work waits for them
// and they are not running.
func (t *loopTimers) arm(w *Watcher) {
	if t.sumC == nil && !w.b.first.IsZero() {
		t.sum.Reset(w.o.Quiet)
		t.sumC = t.sum.C
	}
	if t.maintC == nil && !w.maintFirst.IsZero() {
		t.maint.Reset(gitQuiet)
		t.maintC = t.maint.C
	}
	if t.settleC == nil && len(w.settling) > 0 {
		t.settle.Reset(w.o.Settle)
		t.settleC = t.settle.C
	}
}

// summaryAt sets the summary timer for when the burst is due (Quiet after
// its last event, or MaxWait after its first): one wake-up at the end of
// a burst, not one at Quiet after its start and another for the rest.
func (t *loopTimers) summaryAt(w *Watcher) {
	if w.b.first.IsZero() {
		return
	}
	now := time.Now()
	due := min(w.b.last.Add(w.o.Quiet).Sub(now), w.b.first.Add(w.o.MaxWait).Sub(now))
	t.sum.Reset(max(due, 0))
	t.sumC = t.sum.C
}

func (t *loopTimers) stop() {
	t.maint.Stop()
	t.sum.Stop()
	t.pause.Stop()
	t.settle.Stop()
}
