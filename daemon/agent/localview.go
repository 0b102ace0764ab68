package agent

import (
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
)

// localView is what a resume shows from the capture and the snapshot
// store: what is degraded, the newest snapshot, an interrupted restore,
// the paths others changed, the conflicts and the work lost. Each lives
// behind its own lock in its own object and changes rarely, while every
// resume reads them all; on a resume's cold path the memory those reads
// touch cost 5% of its time. So the agent keeps the view it made last and
// uses it while the view stamp (package viewstamp) says nothing in it
// changed and it is younger than viewFresh.
//
// A view is never shared with a caller that may change it: its slices
// are only read, and appended to only by copying (they are clipped).
type localView struct {
	stamp uint64    // viewstamp.Now as the view was read
	made  time.Time // when it was read

	degraded           []string // the capture's degraded sources
	snapDegraded       bool     // "snapshots" is degraded
	snapshot           *capsule.SnapshotRef
	restoreInterrupted *capsule.RestoreInterrupted
	byOthers           []capsule.ByOther
	conflicts          []capsule.PathConflict
	workLost           []capsule.WorkLost
}

// viewFresh is how long a view is used at most. What goes stale with
// time rather than with a change (the workdir's path is looked at again
// after a second, an interrupted restore is shown for a week) shows at
// most this much later than it would without the view.
const viewFresh = time.Second

// viewCache holds the agent's last view; the zero value keeps none until
// enabled.
type viewCache struct {
	// enabled: every value the view holds bumps the view stamp when it
	// changes. Off when the snapshot store runs in its owner's worker
	// (its changes are made in another process).
	enabled bool
	last    atomic.Pointer[localView]
	// fresh replaces viewFresh when set (tests keep a view as long as
	// they need, so a change that did not replace it shows).
	fresh atomic.Int64
}

// view is the agent's local view as of now.
func (a *Agent) view() *localView {
	if !a.views.enabled {
		return a.readView(0, time.Time{})
	}
	stamp, now := viewstamp.Now(), time.Now()
	if v := a.views.last.Load(); v != nil && v.stamp == stamp && now.Sub(v.made) < a.viewFreshness() {
		if checkViews.Load() {
			a.checkView(v)
		}
		return v
	}
	v := a.readView(stamp, now)
	a.views.last.Store(v)
	return v
}

// viewFreshness is viewFresh, or what a test set instead.
func (a *Agent) viewFreshness() time.Duration {
	if f := a.views.fresh.Load(); f != 0 {
		return time.Duration(f)
	}
	return viewFresh
}

// readView reads the view from the capture and the snapshot store. The
// stamp and time it is tagged with were taken before.
func (a *Agent) readView(stamp uint64, made time.Time) *localView {
	v := &localView{stamp: stamp, made: made, degraded: slices.Clip(a.capture.DegradedSources())}
	a.viewSnapshot(v)
	v.byOthers = []capsule.ByOther{}
	for _, o := range a.capture.ByOthers() {
		v.byOthers = append(v.byOthers, capsule.ByOther{Path: o.Path, By: o.By})
	}
	v.conflicts = []capsule.PathConflict{}
	for _, c := range a.capture.Conflicts() {
		v.conflicts = append(v.conflicts, capsule.PathConflict{Path: c.Path, Agents: c.Agents, At: c.At})
	}
	v.byOthers, v.conflicts = slices.Clip(v.byOthers), slices.Clip(v.conflicts)
	v.workLost = slices.Clip(a.capture.WorkLost())
	return v
}

// viewSnapshot reads the snapshot store's part of the view: the newest
// snapshot, an interrupted restore, and whether snapshots are degraded.
func (a *Agent) viewSnapshot(v *localView) {
	v.snapDegraded = a.snapErr != nil || (a.snaps != nil && (a.snaps.GCProblem() != "" || a.snaps.WorkdirProblem() != ""))
	if a.snaps == nil {
		return
	}
	if ir, ok := a.snaps.Interrupted(); ok {
		v.restoreInterrupted = a.restoreInterrupted(ir)
	}
	s, ok := a.newestAtOpen, a.newestAtOpen.ID != ""
	if !a.capture.StartSnapshotRunning() {
		// Otherwise the newest as the store opened: the store answers
		// once the start snapshot, seconds in a large tree, is done.
		s, ok = a.snaps.Newest()
	}
	if ok {
		v.snapshot = &capsule.SnapshotRef{ID: s.ID, At: s.Time, Trigger: s.Trigger, Files: s.Files()}
	}
}

// fill sets in r what the view shows, as resume places it: the capture's
// degraded sources, then the fleet's (fleetResume, read live), then
// "snapshots".
func (v *localView) fill(a *Agent, r *capsule.Resume) {
	r.Degraded = append(r.Degraded, v.degraded...)
	a.fleetResume(r)
	if v.snapDegraded && !slices.Contains(r.Degraded, "snapshots") {
		r.Degraded = append(r.Degraded, "snapshots")
	}
	if v.restoreInterrupted != nil {
		r.RestoreInterrupted = v.restoreInterrupted
	}
	if v.snapshot != nil {
		r.Snapshot = v.snapshot
	}
	r.SinceLastVisit.ByOthers, r.Conflicts = v.byOthers, v.conflicts
	r.WorkLost = v.workLost
}

// checkViewGrace is generous: a loaded machine may hold a goroutine
// between a change and its bump for long.
const checkViewGrace = 10 * time.Second

// checkViews: every kept view used again is compared with one read afresh
// (CheckViews).
var checkViews atomic.Bool

// CheckViews has every resume that uses a kept view compare it with one
// read afresh, and panic when they differ while the view stamp has not
// moved: a value a resume shows changed without telling the stamp. For
// tests; it makes each resume read its view twice.
func CheckViews() { checkViews.Store(true) }

// checkView panics when kept differs from the view read now and the view
// stamp does not move within checkViewGrace (a change can be read before
// the stamp moves only between its holder's two statements).
func (a *Agent) checkView(kept *localView) {
	fresh := a.readView(kept.stamp, kept.made)
	if reflect.DeepEqual(kept, fresh) {
		return
	}
	for deadline := time.Now().Add(checkViewGrace); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if viewstamp.Now() != kept.stamp {
			return
		}
	}
	panic(fmt.Sprintf("agent %s: resume's kept view is stale (a value changed without viewstamp.Changed):\nkept:  %+v\nfresh: %+v", a.name, *kept, *fresh))
}
