package agent

import (
	"context"
	"errors"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/fleetsnap"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/ops"
)

// Work snapshots across machines: with a nats upstream's `snapshots =
// true`, each snapshot the agent takes is shipped to the fleet's object
// store off the hot path, and a snapshot id the local store lacks is
// fetched from there before show, diff or restore answer.

// shipTimeout bounds one shipping of a snapshot; FleetFetchTimeout one
// fetch, which a show or restore of a snapshot only the fleet has waits
// for (the API's answer and the client allow for it).
const (
	shipTimeout       = 5 * time.Minute
	FleetFetchTimeout = ops.FleetFetchTimeout
)

// fleetSnaps is the agent's link to the fleet's snapshot bucket.
type fleetSnaps struct {
	upstream string
	bucket   fleetsnap.Bucket
	ship     *fleetsnap.Shipper // used by the shipping goroutine alone
	keeper   *fleetsnap.Keeper  // the same
	due      chan struct{}      // buffered 1: a snapshot was taken
}

// openFleetSnaps links the store to the first nats upstream with
// snapshots on, and has each work record name the files kept off the
// fleet (withhold: snapshots.fleet_withhold). Called by Open after the
// store and the fleets are open.
func (a *Agent) openFleetSnaps(withhold []string, g *guard.Guard, so *snapshot.Options) {
	if a.snaps == nil {
		return
	}
	keep, keepBytes := snapshot.DefaultKeepCount, int64(snapshot.DefaultKeepBytes)
	if so != nil && so.KeepCount > 0 {
		keep = so.KeepCount
	}
	if so != nil && so.KeepBytes > 0 {
		keepBytes = so.KeepBytes
	}
	for _, ur := range a.ups {
		f := ur.Fleet
		if f == nil || !ur.Cfg.Snapshots {
			continue
		}
		name := ur.Client.Name()
		w, err := fleetsnap.NewWithholder(withhold, g)
		if err != nil {
			// config.Check refused such patterns already: ship nothing.
			a.log.Error("work snapshots are not shipped to the fleet", "upstream", name, "err", err)
			return
		}
		a.fsnaps = &fleetSnaps{upstream: name, bucket: f,
			ship:   fleetsnap.NewShipper(a.snaps, f, w, a.name, f.Machine(), a.log),
			keeper: fleetsnap.NewKeeper(f, a.name, keep, keepBytes, a.log),
			due:    make(chan struct{}, 1)}
		st := a.snaps
		a.capture.NameWithheld(func(ctx context.Context, id string) ([]snapshot.Withheld, error) { return w.Withheld(ctx, st, id) })
		return
	}
}

// snapshotTaken tells the shipper a snapshot is waiting. It never blocks.
func (fs *fleetSnaps) snapshotTaken() {
	if fs == nil {
		return
	}
	select {
	case fs.due <- struct{}{}:
	default:
	}
}

// shipSnapshots ships the newest snapshot after each one taken (and the
// newest at start) until ctx is done. A failure is logged and retried at
// the next snapshot, which ships every object the bucket still lacks.
// Between snapshots, and at most every quarter of the grace period, it
// applies the agent's retention to the bucket (keepFleetSnapshots).
func (a *Agent) shipSnapshots(ctx context.Context) {
	fs := a.fsnaps
	fs.snapshotTaken()
	every := fleetsnap.Grace() / 4
	tick := time.NewTicker(every)
	defer tick.Stop()
	var kept time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.keepFleetSnapshots(ctx)
			kept = time.Now()
			continue
		case <-fs.due:
		}
		if !a.fleetWriter() {
			continue // another daemon writes this agent now: its snapshots are its own
		}
		newest, ok := a.snaps.Newest()
		if !ok {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, shipTimeout)
		st, err := fs.ship.Ship(sctx, newest.ID)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, snapshot.ErrClosed):
			a.log.Warn("shipping the work snapshot to the fleet failed; retried after the next snapshot",
				"upstream", fs.upstream, "snapshot", newest.ID, "err", err)
		case err == nil && !st.Already:
			a.log.Debug("work snapshot shipped to the fleet", "upstream", fs.upstream, "snapshot", newest.ID,
				"objects", st.Objects, "sent", st.Sent, "bytes", st.Bytes, "withheld", len(st.Withheld))
			if time.Since(kept) >= every {
				a.keepFleetSnapshots(ctx)
				kept = time.Now()
			}
		}
	}
}

// keepFleetSnapshots applies the agent's retention to the fleet's bucket
// (fleetsnap.Keeper) when this daemon writes the agent.
func (a *Agent) keepFleetSnapshots(ctx context.Context) {
	if !a.fleetWriter() {
		return
	}
	kctx, cancel := context.WithTimeout(ctx, shipTimeout)
	defer cancel()
	if _, err := a.fsnaps.keeper.Keep(kctx); err != nil && ctx.Err() == nil {
		a.log.Warn("fleet snapshot retention failed; tried again later", "upstream", a.fsnaps.upstream, "err", err)
	}
}

// fleetWriter reports whether this daemon writes the agent in its fleets:
// no other daemon holds the agent's state there.
func (a *Agent) fleetWriter() bool {
	if a.handedOver() != nil {
		return false
	}
	for _, c := range a.FleetConflicts() {
		if !c.Held {
			return false
		}
	}
	return true
}

// orFromFleet runs op on the local store; when the store lacks snapshot
// id and the fleet has it, it fetches it and runs op again.
func (a *Agent) orFromFleet(ctx context.Context, st SnapshotStore, id string, op func() error) error {
	err := op()
	fetched, err := a.fetchFromFleet(ctx, st, id, err)
	if fetched {
		return op()
	}
	return err
}

// fetchFromFleet brings snapshot id from the fleet when the local store
// says NOT_FOUND and the fleet has snapshots on; it reports whether it
// did, so the caller asks the store again. A fleet that does not answer
// is 503 FLEET_UNAVAILABLE naming why.
func (a *Agent) fetchFromFleet(ctx context.Context, st SnapshotStore, id string, err error) (bool, error) {
	var ce *capsule.Error
	if a.fsnaps == nil || id == "" || !errors.As(err, &ce) || ce.Code != capsule.CodeNotFound || ce.Field != "id" {
		return false, err
	}
	fctx, cancel := context.WithTimeout(ctx, FleetFetchTimeout)
	defer cancel()
	snap, ferr := fleetsnap.Fetch(fctx, st, a.fsnaps.bucket, a.name, id)
	if ferr == nil {
		a.log.Info("work snapshot fetched from the fleet", "upstream", a.fsnaps.upstream, "snapshot", snap.ID)
		return true, nil
	}
	if errors.As(ferr, &ce) {
		if ce.Code == capsule.CodeFleetSnapshotDamaged {
			a.log.Warn("a work snapshot in the fleet is damaged or forged; nothing of it was kept", "upstream", a.fsnaps.upstream, "id", id, "err", ferr)
		}
		return false, ferr // the fleet's NOT_FOUND (or a bad id) names both places; a damaged snapshot says what is wrong
	}
	a.log.Warn("fetching a work snapshot from the fleet failed", "upstream", a.fsnaps.upstream, "id", id, "err", ferr)
	return false, capsule.Refuse(capsule.CodeFleetUnavailable, "id",
		"no snapshot %s here, and the fleet (upstream %s) could not be asked: %v; retry when it answers", id, a.fsnaps.upstream, ferr)
}
