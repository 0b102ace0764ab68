package daemon

import (
	"context"
	"runtime/debug"
	"time"
)

// returnStartMemory waits until the start-up work is over (the places
// watched again once opened closes, every agent's start snapshot, and the
// first pass over the spool once ingested closes)
// and then collects the garbage it left and gives the freed pages back to
// the system, once.
//
// Why: start-up allocates several times what
// the daemon keeps (every secret rule's regexp compiled to check it, the
// residency's log read whole, the snapshot's walk and hashing): on a
// restart, 14 MB of heap at rest where a collection left 3 MB (1.4 MB
// since the secret rules' keyword matcher shrank). An idle daemon allocates
// too little to run the collector again, so that garbage stays resident
// until the runtime's forced collection (every 2 minutes) and its
// scavenger's slow return; docs/PERFORMANCE.md ("Resting memory") has the
// figures. The price is one collection of a heap of a few MB, a few
// milliseconds of CPU at start, logged at debug level.
func (d *Daemon) returnStartMemory(ctx context.Context, opened, ingested <-chan struct{}) {
	select {
	case <-opened:
	case <-ctx.Done():
		return
	}
	st := d.snap()
	for _, name := range st.names {
		select {
		case <-st.agents[name].Capture().StartSnapshotDone():
		case <-ctx.Done():
			return
		}
	}
	select {
	case <-ingested:
	case <-ctx.Done():
		return
	}
	began := time.Now()
	debug.FreeOSMemory()
	d.log.Debug("start-up done: its garbage collected and returned to the system", "took", time.Since(began))
}
