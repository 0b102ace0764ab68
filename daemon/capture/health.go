package capture

import "github.com/continuityd/continuityd/internal/ops"

// Component is how one of the capture's parts is doing, for status
// (internal/ops declares it, as GET /v1/status answers it).
type Component = ops.Component

// Component states.
const (
	StateOK       = "ok"
	StateDegraded = "degraded"
	StateOff      = "off"
)

// Health says how the watch, the transcripts, the snapshots, the
// work-lost checks and the commits' receipts are doing, in that order,
// each with what it is doing now (a first snapshot under way shows how
// far it got).
func (c *Capture) Health() []Component {
	return []Component{c.watchHealth(), c.transcripts.health(), c.snapshotHealth(), c.workLostHealth(), c.commitsHealth()}
}

func (c *Capture) watchHealth() Component {
	h := Component{Name: "watch", State: StateOff}
	if c.o.Workdir == "" || !c.o.Watch.Enabled {
		return h
	}
	c.mu.Lock()
	w, failed := c.watcher, c.watchErr
	c.mu.Unlock()
	switch {
	case failed != "":
		h.State, h.Detail = StateDegraded, failed
	case w == nil:
		h.State, h.Detail = StateOK, "starting"
	case !isClosed(w.Ready()):
		// A place adopted by a session is served before its tree is
		// watched: until then a change may go unseen.
		h.State, h.Detail = StateOK, "starting: adding the watches"
	case w.Degraded() != "":
		h.State, h.Detail = StateDegraded, w.Degraded()
	default:
		h.State = StateOK
	}
	return h
}

func (c *Capture) snapshotHealth() Component {
	h := Component{Name: "snapshots", State: StateOff}
	s := c.snapshotter()
	if s == nil {
		return h
	}
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	switch {
	case s.store.WorkdirProblem() != "":
		h.State, h.Detail = StateDegraded, s.store.WorkdirProblem()
	case err != nil:
		h.State, h.Detail = StateDegraded, err.Error()
	default:
		h.State, h.Detail = StateOK, s.startProgress()
	}
	return h
}

// health is the follower's part of Health.
func (f *transcriptFollower) health() Component {
	h := Component{Name: "transcripts", State: StateOff}
	if f.c.o.Workdir == "" || !f.c.o.Transcripts.Enabled {
		return h
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.failed != "":
		h.State, h.Detail = StateDegraded, f.failed
	case f.path != "":
		h.State, h.Detail = StateOK, "following "+f.path
	case f.waiting != "":
		h.State, h.Detail = StateOK, "no session yet; watching "+f.waiting
	default:
		h.State, h.Detail = StateOK, "starting"
	}
	return h
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
