package agent

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/upstream"
)

// readyAnswers is resume's whole answer made ahead. A resume reaches a
// daemon idle since the last write, and on that cold path making the
// answer (the local view put in the state's kept bytes, the upstreams'
// state encoded) cost 5% of its time, though it is a microsecond warm.
// So while resumes are being asked, the agent's own goroutine makes the
// answer the next resume would make after each commit and each delivery,
// and keeps it with what it was made from: the residency's answer of the
// published state, the view stamp, the view's age and the upstreams'
// state. A resume that reads the same uses those bytes; anything else and
// it makes its own, so an answer made ahead is never served stale.
type readyAnswers struct {
	// usable: the answer depends on nothing but what the key holds (the
	// view is kept, no fleet, no upstream with a view of its own). Set at
	// the end of Open, while the store's writer may already commit.
	usable atomic.Bool
	kick   chan struct{} // buffered 1: something the answer shows moved
	asked  atomic.Int64  // when a resume was last asked (unix ns)
	last   atomic.Pointer[readyAnswer]
	served atomic.Uint64 // resumes answered with an answer made ahead (tests)
}

// readyAnswer is one answer made ahead and what it was made from.
type readyAnswer struct {
	ans   *residency.ResumeAnswer
	stamp uint64
	made  time.Time // when its view was read
	ups   []capsule.UpstreamState
	raw   []byte
}

// initReady decides whether answers can be made ahead for this agent;
// call it once the agent's upstreams and fleets are known.
func (a *Agent) initReady() {
	a.ready.kick = make(chan struct{}, 1)
	usable := a.views.enabled && len(a.fleets) == 0
	for _, ur := range a.ups {
		if _, ok := ur.Client.(upstream.Resumer); ok {
			usable = false
		}
	}
	a.ready.usable.Store(usable)
}

// prepareAnswer asks for the answer to be made ahead again (after a
// commit, after a delivery). It never blocks.
func (a *Agent) prepareAnswer() {
	if !a.ready.usable.Load() {
		return
	}
	select {
	case a.ready.kick <- struct{}{}:
	default:
	}
}

// prepareAnswers makes the answer ahead whenever asked to, as long as a
// resume was asked within the view's freshness: an agent nobody resumes
// pays nothing for it.
func (a *Agent) prepareAnswers(ctx context.Context) {
	if !a.ready.usable.Load() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.ready.kick:
		}
		if time.Since(time.Unix(0, a.ready.asked.Load())) < a.viewFreshness() {
			a.makeReady()
		}
	}
}

// makeReady makes the answer a resume would make now and keeps it.
func (a *Agent) makeReady() {
	stamp := viewstamp.Now() // before anything is read
	ans, _ := a.store.VisitAnswer()
	ups := a.UpstreamStates()
	v := a.view()
	if v.stamp != stamp {
		return // the view moved while it was read
	}
	raw, ok, err := a.localAnswer(ans, v, ups, nil, nil)
	if err != nil || !ok {
		return
	}
	a.ready.last.Store(&readyAnswer{ans: ans, stamp: stamp, made: v.made, ups: ups, raw: raw})
}

// localAnswer is the answer of ans with the view v, the upstreams' state
// ups and, degraded, the upstreams that did not answer in time (late) in
// its slots, appended to buf; ok is false when the resume has more to
// show than the slots hold (localOnly: the whole document is made then).
func (a *Agent) localAnswer(ans *residency.ResumeAnswer, v *localView, ups []capsule.UpstreamState, late []string, buf []byte) (raw []byte, ok bool, err error) {
	p := capsule.Resume{Degraded: []string{}, Upstreams: ups}
	v.fill(a, &p)
	p.Degraded = append(p.Degraded, late...)
	if !localOnly(&p) || a.hasRemote() {
		return nil, false, nil
	}
	raw, err = ans.Append(buf, &residency.LocalParts{Snapshot: p.Snapshot, ByOthers: p.SinceLastVisit.ByOthers,
		Upstreams: p.Upstreams, Degraded: p.Degraded, Conflicts: p.Conflicts})
	return raw, err == nil, err
}

// readyFor is the answer made ahead for ans, if everything it was made
// from still holds.
func (a *Agent) readyFor(ans *residency.ResumeAnswer) ([]byte, bool) {
	a.ready.asked.Store(time.Now().UnixNano())
	r := a.ready.last.Load()
	stamp := viewstamp.Now()
	if r == nil || r.ans != ans || r.stamp != stamp || time.Since(r.made) >= a.viewFreshness() {
		return nil, false
	}
	ups := a.UpstreamStates()
	if !sameUpstreams(r.ups, ups) {
		return nil, false
	}
	if checkViews.Load() {
		a.checkReady(r, ans, stamp, ups)
	}
	a.ready.served.Add(1)
	return r.raw, true
}

// checkReady panics when r is served for another state, view stamp or
// upstreams' state than the resume read, or when its bytes differ from
// the answer made afresh from the same (CheckViews).
func (a *Agent) checkReady(r *readyAnswer, ans *residency.ResumeAnswer, stamp uint64, ups []capsule.UpstreamState) {
	if r.ans != ans || r.stamp != stamp || !sameUpstreams(r.ups, ups) {
		panic(fmt.Sprintf("agent %s: resume served an answer made ahead for another state", a.name))
	}
	ups = a.UpstreamStates()
	v := a.view()
	fresh, ok, err := a.localAnswer(r.ans, v, ups, nil, nil)
	if err != nil || !ok || v.stamp != stamp || viewstamp.Now() != stamp || !sameUpstreams(ups, r.ups) || bytes.Equal(fresh, r.raw) {
		return // moved meanwhile, or the same
	}
	panic(fmt.Sprintf("agent %s: resume's answer made ahead is stale:\nready: %s\nfresh: %s", a.name, r.raw, fresh))
}

// sameUpstreams reports whether two reads of the upstreams' state are
// equal, value for value.
func sameUpstreams(x, y []capsule.UpstreamState) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		a, b := x[i], y[i]
		if a.Name != b.Name || a.Kind != b.Kind || a.State != b.State || a.Pending != b.Pending ||
			a.DeadLetter != b.DeadLetter || a.Delivered != b.Delivered ||
			!samePtr(a.LastError, b.LastError, func(p, q string) bool { return p == q }) ||
			!samePtr(a.LastSuccess, b.LastSuccess, time.Time.Equal) ||
			!samePtr(a.NextAttempt, b.NextAttempt, time.Time.Equal) {
			return false
		}
	}
	return true
}

func samePtr[T any](p, q *T, eq func(T, T) bool) bool {
	if p == nil || q == nil {
		return p == q
	}
	return eq(*p, *q)
}

// countLogged is how many of a commit's events are writes to the log.
func countLogged(evs []residency.Event) int {
	n := 0
	for _, e := range evs {
		if e.Logged {
			n++
		}
	}
	return n
}
