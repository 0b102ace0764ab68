package attribution

import "time"

// WhoAt says who changed p at at, as well as the ledger knows now: the
// agent of the change it credited nearest to at (within Slack), else the
// agent of a claim or shell window that explains a change then. known is
// false when nothing in the ledger speaks of p then; by is "" for
// outside. The version journal asks it when it keeps a version, and again
// when it lists one (a hook slower than the journal credits it later).
func (l *Ledger) WhoAt(p string, at time.Time) (by string, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *Change
	var gap time.Duration
	for i, c := range l.paths[p] {
		if !within(c.At, at, l.opt.Slack) {
			continue
		}
		if g := absDur(c.At.Sub(at)); best == nil || g < gap {
			best, gap = &l.paths[p][i], g
		}
	}
	if best != nil {
		return best.By, true
	}
	if agents, _ := l.claimFor(p, at); len(agents) > 0 {
		return agents[0], true
	}
	return "", false
}
