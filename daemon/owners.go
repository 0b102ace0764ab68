package daemon

import (
	"context"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/asowner"
	"github.com/continuityd/continuityd/daemon/place"
	worksnap "github.com/continuityd/continuityd/daemon/snapshot"
)

// asOwner has agent ac act as its workdir's owner when the daemon runs as
// root and another user owns the workdir (package asowner): its snapshot
// store lives in that owner's worker, under STATE/owners/UID, and its
// handoff files, transcripts and repository are read, and git run on it,
// with the owner's rights. Otherwise ao stays as it is: everything in
// process, as a user's daemon always runs. It returns the owner's uid
// when the agent acts as the owner (need).
func (d *Daemon) asOwner(ao *agent.Options, cfg *config.Config, ac config.Agent) (uid uint32, need bool) {
	owner, need, err := asowner.For(ac.Workdir)
	if err != nil {
		d.log.Debug("the workdir's owner is not known; the agent's own checks say why", "agent", ac.Name, "workdir", ac.Workdir, "err", err)
		return 0, false
	}
	if !need {
		return 0, false
	}
	w := d.owners.For(owner)
	ao.Capture.Opener = w.Opener()
	ao.Capture.GitAs = owner.Git()
	agentDir, log := ao.Dir, d.log
	ao.OpenSnapshots = func(ctx context.Context, opt worksnap.Options) (agent.SnapshotStore, error) {
		dir, err := asowner.StoreDir(asowner.StoreOptions{StateDir: cfg.Daemon.StateDir, AgentDir: agentDir,
			Agent: ac.Name, Workdir: place.Canonical(ac.Workdir), Old: opt.Dir, Owner: owner, Logger: log})
		if err != nil {
			return nil, err
		}
		opt.Dir = dir
		st, err := w.OpenStore(ctx, opt)
		if err != nil {
			return nil, err // not a nil *Store in a non-nil interface
		}
		return st, nil
	}
	return owner.UID, true
}

// stopIdleWorkers ends the workers of the owners no agent of the running
// configuration acts as any more (a reload removed their last agent, or
// moved it to a workdir of another owner): their processes do not wait
// for the daemon's end.
func (d *Daemon) stopIdleWorkers() {
	keep := map[uint32]bool{}
	for _, uid := range d.snap().owners {
		keep[uid] = true
	}
	d.owners.Retain(keep)
}
