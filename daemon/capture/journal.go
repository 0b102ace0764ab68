package capture

import (
	"context"
	"fmt"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/termsafe"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/daemon/worklost"
)

// Journal is the version journal as the capture feeds it: each path the
// watcher saw settle, and who is credited with a version.
type Journal interface {
	Settled(path string, last time.Time)
	SetWho(func(path string, at time.Time) (by, session string, turn time.Time))
	worklost.Journal
}

// lossJournal is the journal work lost asks, nil when none.
func (c *Capture) lossJournal() worklost.Journal {
	if jp := c.journal.j.Load(); jp != nil {
		return *jp
	}
	return nil
}

// notCovered says what the journal could not have captured before a
// loss found in snapshot snap (taken at its time): while the daemon was
// not watching (a loss found in the start snapshot, since the previous
// one), or inside the settle window before each file was reverted.
func (c *Capture) notCovered(snap snapshotPoint, before time.Time) string {
	settle := c.o.Watch.Settle
	if settle <= 0 {
		settle = watch.DefaultSettle
	}
	if snap.start {
		return fmt.Sprintf("the daemon was not watching between %s and %s (up to %s): a change made then was never captured, and what the journal kept before is the newest there is",
			before.UTC().Format(time.RFC3339), snap.at.UTC().Format(time.RFC3339), snap.at.Sub(before).Round(time.Second))
	}
	return fmt.Sprintf("a change made less than %s before a file was reverted (the settle window) was never captured; every version that stood longer is kept", settle)
}

// snapshotPoint is what notCovered needs of the snapshot a loss was
// found in.
type snapshotPoint struct {
	at    time.Time
	start bool
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
// name, "" for outside (or no ledger); and, when it is this agent's, the
// session and the beginning of the turn it was made in, as its hooks'
// prompts told them (none known: "" and zero).
func (c *Capture) whoAt(p string, at time.Time) (by, session string, turn time.Time) {
	if c.attr == nil {
		return "", "", time.Time{}
	}
	by, _ = c.attr.ledger.WhoAt(p, at)
	if by != c.o.Agent {
		return by, "", time.Time{}
	}
	if ts, ok := c.turnAt(at); ok {
		return by, ts.session, ts.at
	}
	return by, "", time.Time{}
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

// beforeTime is when the journal last saw the lost files (the newest
// version it kept of them), else the time of the snapshot before.
func (s *snapshots) beforeTime(ctx context.Context, before string, w *worklost.WorkLost) time.Time {
	var t time.Time
	for _, v := range w.Versions {
		if v.At.After(t) {
			t = v.At
		}
	}
	if t.IsZero() {
		if d, err := s.store.Show(ctx, before); err == nil {
			t = d.Time
		}
	}
	return t
}

// shownVersions are a loss's journal versions as resume shows them: a
// secret-shaped name redacted, as the loss's paths are.
func (c *Capture) shownVersions(vs []capsule.LostVersion) []capsule.LostVersion {
	if len(vs) == 0 {
		return nil
	}
	out := make([]capsule.LostVersion, len(vs))
	for i, v := range vs {
		out[i] = v
		if name := termsafe.Name(v.Path); c.guard.Redact(name) != name {
			out[i].Path = c.guard.Redact(name)
		}
	}
	return out
}
