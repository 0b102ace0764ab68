package attribution

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// State is what a Ledger keeps across the daemon's runs: each path's recent
// changes and whose they are, each agent's open work (its conflicts) and
// its last visit, and since when the ledger has been told of the
// workdir's changes. Claims and shell windows are not kept: they explain
// changes seconds apart, and a restart ends them.
//
// A ledger restored from a State knows who changed what from its Since
// on, except what changed while the daemon was down: those changes were
// never seen as they happened, so no agent is credited with them, and a
// restore of the agent's own paths leaves them alone (it errs towards
// touching less).
type State struct {
	Since   time.Time                       `json:"since"`
	Changes []Change                        `json:"changes"`           // sorted by path, then time
	Pending map[string]map[string]time.Time `json:"pending,omitempty"` // agent → path → its latest change
	Visits  map[string]time.Time            `json:"visits,omitempty"`  // agent → its last visit
}

// State returns a copy of what the ledger keeps across runs.
func (l *Ledger) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

func (l *Ledger) stateLocked() State {
	s := State{Since: l.opt.Since, Changes: make([]Change, 0, len(l.paths)),
		Pending: make(map[string]map[string]time.Time, len(l.pending)), Visits: maps.Clone(l.visits)}
	for _, hist := range l.paths {
		s.Changes = append(s.Changes, hist...)
	}
	slices.SortFunc(s.Changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), a.At.Compare(b.At), cmp.Compare(a.By, b.By))
	})
	for agent, paths := range l.pending {
		if len(paths) > 0 {
			s.Pending[agent] = maps.Clone(paths)
		}
	}
	return s
}

// Delta is what changed in a Ledger's State since the Delta before it (or
// the State taken before it): each path whose changes or open work
// changed, as it is now, and the visits when they changed. Applied in
// order to that State (State.Apply), the Deltas give the State now, so a
// keeper can append what a burst changed instead of writing the whole
// ledger again.
type Delta struct {
	Paths  map[string]PathState `json:"paths,omitempty"`
	Visits map[string]time.Time `json:"visits,omitempty"` // all of them, when one changed
}

// PathState is one path's part of a State: its changes, oldest first, and
// the agents whose open work it is (with its latest change of theirs).
// Both empty: the path is forgotten.
type PathState struct {
	Changes []Change             `json:"changes,omitempty"`
	Pending map[string]time.Time `json:"pending,omitempty"`
}

// Empty reports whether d changes nothing.
func (d Delta) Empty() bool { return len(d.Paths) == 0 && d.Visits == nil }

// TakeDelta returns what changed since the last TakeDelta or TakeState,
// and the Generation it brings the state to; the next Delta starts from
// there. Changes are gathered from the first TakeState on: a keeper takes
// the whole State first.
func (l *Ledger) TakeDelta() (Delta, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d Delta
	if len(l.dirty) > 0 {
		d.Paths = make(map[string]PathState, len(l.dirty))
		for p := range l.dirty {
			ps := PathState{Changes: slices.Clone(l.paths[p])}
			for agent, paths := range l.pending {
				if t, ok := paths[p]; ok {
					if ps.Pending == nil {
						ps.Pending = map[string]time.Time{}
					}
					ps.Pending[agent] = t
				}
			}
			d.Paths[p] = ps
		}
		clear(l.dirty)
	}
	if l.visitsDirty {
		d.Visits = maps.Clone(l.visits)
		l.visitsDirty = false
	}
	return d, l.gen
}

// TakeState returns the State and its Generation, as State and
// Generation do at one moment, and starts the next Delta from it.
func (l *Ledger) TakeState() (State, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.dirty)
	l.visitsDirty, l.tracking = false, true
	return l.stateLocked(), l.gen
}

// Apply brings s to what it is after ds, Deltas taken in this order after
// s (Restore checks the result as it checks any State read from disk). A
// Delta holds each path it names whole, so the last one to name a path
// decides it; s is gone through once, however many Deltas there are.
func (s *State) Apply(ds ...Delta) {
	paths := map[string]PathState{}
	var visits map[string]time.Time
	for _, d := range ds {
		maps.Copy(paths, d.Paths)
		if d.Visits != nil {
			visits = d.Visits
		}
	}
	if len(paths) > 0 {
		s.Changes = slices.DeleteFunc(s.Changes, func(c Change) bool { _, ok := paths[c.Path]; return ok })
		for agent, held := range s.Pending {
			maps.DeleteFunc(held, func(p string, _ time.Time) bool { _, ok := paths[p]; return ok })
			if len(held) == 0 {
				delete(s.Pending, agent)
			}
		}
		for p, ps := range paths {
			for _, c := range ps.Changes {
				c.Path = p
				s.Changes = append(s.Changes, c)
			}
			for agent, at := range ps.Pending {
				if s.Pending == nil {
					s.Pending = map[string]map[string]time.Time{}
				}
				if s.Pending[agent] == nil {
					s.Pending[agent] = map[string]time.Time{}
				}
				s.Pending[agent][p] = at
			}
		}
		slices.SortFunc(s.Changes, func(a, b Change) int {
			return cmp.Or(cmp.Compare(a.Path, b.Path), a.At.Compare(b.At), cmp.Compare(a.By, b.By))
		})
	}
	if visits != nil {
		s.Visits = maps.Clone(visits)
	}
}

// Generation counts the changes to what State returns: a caller that
// saves the state saves again only when it moved.
func (l *Ledger) Generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// Restore makes a Ledger from a State an earlier run kept. The state was
// read from disk, so it passes the same checks as the events that built
// it: agent names and paths are checked, kinds must be known, and the
// bounds of o hold (the oldest changes beyond them are dropped). o.Since
// is replaced by the state's.
func Restore(o Options, s State) (*Ledger, error) {
	if s.Since.IsZero() {
		return nil, fmt.Errorf("attribution: state without since")
	}
	o.Since = s.Since
	l := New(o)
	for i, c := range s.Changes {
		if err := validRel(c.Path); err != nil {
			return nil, fmt.Errorf("attribution: changes[%d]: %w", i, err)
		}
		switch {
		case c.Kind == KindOutside && c.By == "":
		case c.Kind == KindEdit || c.Kind == KindTranscript || c.Kind == KindShell:
			if err := checkAgent(c.By); err != nil {
				return nil, fmt.Errorf("attribution: changes[%d].by: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("attribution: changes[%d]: kind %q with by %q", i, c.Kind, c.By)
		}
		if c.At.IsZero() {
			return nil, fmt.Errorf("attribution: changes[%d]: no time", i)
		}
		hist := append(l.paths[c.Path], c)
		slices.SortStableFunc(hist, func(a, b Change) int { return a.At.Compare(b.At) })
		if len(hist) > l.opt.MaxHistory {
			hist = slices.Delete(hist, 0, len(hist)-l.opt.MaxHistory)
		}
		l.paths[c.Path] = hist
	}
	l.rebuildAges()
	l.rebuildByTime()
	for len(l.paths) > l.opt.MaxPaths {
		l.forgetOldestPath()
	}
	for agent, paths := range s.Pending {
		if err := checkAgent(agent); err != nil {
			return nil, fmt.Errorf("attribution: pending: %w", err)
		}
		for p, at := range paths {
			if err := validRel(p); err != nil {
				return nil, fmt.Errorf("attribution: pending[%s]: %w", agent, err)
			}
			if _, known := l.paths[p]; !known {
				continue // forgotten with its history: no longer anyone's open work
			}
			if l.pending[agent] == nil {
				l.pending[agent] = map[string]time.Time{}
			}
			l.pending[agent][p] = at
		}
	}
	for agent, at := range s.Visits {
		if err := checkAgent(agent); err != nil {
			return nil, fmt.Errorf("attribution: visits: %w", err)
		}
		l.visits[agent] = at
	}
	return l, nil
}
