package capture

import (
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/watch"
)

// Journal is the version journal as the capture feeds it: each path the
// watcher saw settle, and who is credited with a version.
type Journal interface {
	Settled(path string, last time.Time)
	SetWho(func(path string, at time.Time) (by, session string))
}

// journalFeed holds the journal the watcher's settled paths go to.
type journalFeed struct{ j atomic.Pointer[Journal] }

// UseJournal makes every path the watcher sees settle a version in j,
// credited as the workdir's ledger says. Call it before Start.
func (c *Capture) UseJournal(j Journal) {
	c.journal.j.Store(&j)
	j.SetWho(c.whoAt)
}

// whoAt is who the ledger credits with p's change at at: the agent's
// name, "" for outside (or no ledger).
func (c *Capture) whoAt(p string, at time.Time) (by, session string) {
	if c.attr == nil {
		return "", ""
	}
	by, _ = c.attr.ledger.WhoAt(p, at)
	return by, ""
}

// settled hands the watcher's settled paths to the journal.
func (c *Capture) settled(paths []watch.Settled) {
	jp := c.journal.j.Load()
	if jp == nil {
		return
	}
	for _, s := range paths {
		(*jp).Settled(s.Path, s.Last)
	}
}
