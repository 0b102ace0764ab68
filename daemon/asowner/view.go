package asowner

import (
	"sync"
	"sync/atomic"
	"time"
)

// viewFresh is how long the worker's answer to a view op stands. The view
// ops (Newest, GCProblem, WorkdirProblem, Interrupted) are asked by every
// resume and status, each a round trip to the owner's process; the
// answers change with the calls this side makes (each drops them) and
// otherwise only with time in the worker (a GC that failed on its own, a
// workdir repointed, an interrupted restore shown long enough), which may
// show this much later.
const viewFresh = time.Second

// viewOps are the ops whose answers are kept; readOps change nothing in
// the store, so they keep them too. Every other call drops them, before
// it is sent and once it is answered.
var (
	viewOps = map[string]bool{opNewest: true, opGCProblem: true, opWorkdir: true, opInterrupted: true}
	readOps = map[string]bool{opList: true, opShow: true, opDiff: true, opBetween: true,
		opLookup: true, opProgress: true, opObjects: true, opReadObjects: true, opMissing: true}
)

// views keeps the view ops' latest answers. epoch counts the calls that
// may have changed the store; an answer fetched in an older epoch is not
// served.
type views struct {
	epoch atomic.Uint64
	mu    sync.Mutex
	kept  map[string]keptView
	clock func() time.Time // time.Now; tests set it
}

func (v *views) now() time.Time {
	if v.clock != nil {
		return v.clock()
	}
	return time.Now()
}

type keptView struct {
	epoch uint64
	at    time.Time
	ans   any
}

// changing marks a call to op as one that may change what the views show.
func (v *views) changing(op string) {
	if !viewOps[op] && !readOps[op] {
		v.epoch.Add(1)
	}
}

// viewQuick is quick for a view op, answered from the kept answer while
// it stands.
func viewQuick[T any](s *Store, op string, ans *T) error {
	epoch := s.views.epoch.Load()
	s.views.mu.Lock()
	k, ok := s.views.kept[op]
	s.views.mu.Unlock()
	if ok && k.epoch == epoch && s.views.now().Sub(k.at) < viewFresh {
		*ans = k.ans.(T)
		return nil
	}
	if err := s.quick(op, request{}, ans); err != nil {
		return err
	}
	s.views.mu.Lock()
	if s.views.kept == nil {
		s.views.kept = map[string]keptView{}
	}
	s.views.kept[op] = keptView{epoch: epoch, at: s.views.now(), ans: *ans}
	s.views.mu.Unlock()
	return nil
}
