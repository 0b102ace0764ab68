package capture

import (
	"context"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/snapshot"
)

// reportLag is how long before a snapshot's parent a change may have
// been made and still be new in the snapshot: the watcher reports a
// burst once it goes quiet (a few seconds), so a change made just before
// the parent was taken may reach only the snapshot after it.
const reportLag = 10 * time.Second

// Whose says whose change each file of snap is (the by of a snapshot's
// file list and of a work record's files), as this agent sees it
// ("agent", "agent:NAME", "outside"), from the workdir's attribution
// ledger: the latest change of the path the ledger credits between the
// snapshot before snap and snap (or, when the watcher reported it only
// after snap was taken, the first one just after). A file the ledger cannot tell of (no
// ledger, the first snapshot, a parent retention dropped, a ledger begun
// after it, a change it did not see) is "": nobody is named on a guess.
func (c *Capture) Whose(ctx context.Context, snap snapshot.Snapshot) func(path string) string {
	none := func(string) string { return "" }
	ledger := c.AttributionLedger()
	s := c.snapshotter()
	if ledger == nil || s == nil || snap.Parent == "" {
		return none
	}
	parent, err := s.store.Lookup(ctx, snap.Parent)
	if err != nil || !ledger.Knows(parent.Time) {
		return none
	}
	// The latest change at or before snap; else the first one reported
	// just after it: the watcher times a change as it handles it, which
	// may be after the snapshot that already holds it.
	latest, late := map[string]attribution.Change{}, map[string]attribution.Change{}
	for _, ch := range ledger.ChangesSince(parent.Time.Add(-reportLag)) {
		switch {
		case !ch.At.After(snap.Time):
			if prev, ok := latest[ch.Path]; !ok || !ch.At.Before(prev.At) {
				latest[ch.Path] = ch
			}
		case !ch.At.After(snap.Time.Add(reportLag)):
			if prev, ok := late[ch.Path]; !ok || ch.At.Before(prev.At) {
				late[ch.Path] = ch
			}
		}
	}
	for p, ch := range late {
		if _, ok := latest[p]; !ok {
			latest[p] = ch
		}
	}
	return func(path string) string {
		ch, ok := latest[c.guard.Redact(path)] // the ledger holds paths redacted
		if !ok {
			return ""
		}
		return attribution.Label(c.o.Agent, ch.By)
	}
}
