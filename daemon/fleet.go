package daemon

import (
	"context"
	"os"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	fleet "github.com/continuityd/continuityd/upstream/nats"
)

// The nats client is the agents' Fleet (and an upstream.Upstream). This
// file is the only one outside cmd/ that names upstream/nats (the layout
// test keeps it so): the rest of the daemon asks the Fleet interface.
var _ agent.Fleet = (*fleet.Client)(nil)

// newFleet builds a nats (fleet) upstream. Its outbox never coalesces: the
// fleet keeps every write, and a restore replays them.
func (d *Daemon) newFleet(name string, uc config.Upstream, cfg *config.Config) (*fleet.Client, error) {
	var token func() (string, error)
	if uc.HasToken() {
		token = uc.Token
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fleet.New(fleet.Options{
		Name: name, URLs: uc.URLs(), CredsFile: uc.CredsFile, NKeyFile: uc.NKeyFile, Token: token,
		CAFile: uc.CAFile, Stream: uc.Stream, Bucket: uc.Bucket, SubjectPrefix: uc.SubjectPrefix,
		Replicas: uc.Replicas, Machine: host, Instance: agent.FleetInstance(cfg.Daemon.StateDir),
		Timeout: uc.Timeout.Duration, ConflictWindow: uc.ConflictWindow.Duration, Logger: d.log,
		OnConflict: func(ce capsule.FleetConflictError) { d.onFleetConflict(name, ce) },
		OnHandover: d.onFleetHandover,
	})
}

// onFleetHandover tells the agent another daemon took it from this one
// (from the client's goroutine; never blocks).
func (d *Daemon) onFleetHandover(h capsule.FleetHandover) {
	st := d.snap()
	if st == nil {
		return
	}
	if a := st.agents[h.Agent]; a != nil {
		a.FleetHandedOver(h)
	}
}

// onFleetConflict tells the agent another daemon writes it (from the
// client's goroutine; never blocks).
func (d *Daemon) onFleetConflict(upstreamName string, ce capsule.FleetConflictError) {
	st := d.snap()
	if st == nil {
		return
	}
	if a := st.agents[ce.Agent]; a != nil {
		a.FleetConflict(upstreamName, ce)
	}
}

// releaseFleets stops the fleet watching the agents that left this daemon
// while their fleet upstream stays: another daemon running them is no
// conflict of this one's.
func releaseFleets(old, next *snapshot, removed []string) {
	for _, name := range removed {
		oa := old.agents[name]
		if oa == nil {
			continue
		}
		for _, u := range oa.Config().Upstreams {
			if ur := next.ups[u]; ur != nil && ur == old.ups[u] && ur.Fleet != nil {
				ur.Fleet.Release(name)
			}
		}
	}
}

// Fleet lists the agents a fleet upstream's bucket knows, with the
// upstream's health (GET /v1/fleet). upstreamName "" picks the only one.
func (d *Daemon) Fleet(ctx context.Context, upstreamName string) (*api.FleetAnswer, error) {
	st := d.snap()
	var names []string
	for name, ur := range st.ups {
		if ur.Fleet != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	switch {
	case len(names) == 0:
		return nil, capsule.Refuse(capsule.CodeNotFound, "upstream",
			"no agent of this daemon ships to a nats upstream; configure one (kind = \"nats\") to see the fleet")
	case upstreamName == "" && len(names) > 1:
		return nil, capsule.Refuse(capsule.CodeInvalidQuery, "upstream",
			"this daemon has several nats upstreams (%v); pick one with ?upstream=NAME (--upstream NAME)", names)
	case upstreamName == "":
		upstreamName = names[0]
	case !slices.Contains(names, upstreamName):
		return nil, capsule.Refuse(capsule.CodeNotFound, "upstream",
			"no nats upstream of that name is in use; the nats upstreams are %v", names)
	}
	ur := st.ups[upstreamName]
	ans := &api.FleetAnswer{Upstream: upstreamName, Stream: ur.Cfg.Stream, Bucket: ur.Cfg.Bucket, Health: ur.Fleet.Health()}
	entries, err := ur.Fleet.Agents(ctx)
	if err != nil {
		return nil, capsule.Refuse(capsule.CodeFleetUnavailable, "upstream",
			"the fleet (upstream %s) did not answer: %v; its health: %s", upstreamName, err, ans.Health.State)
	}
	ans.Agents = entries
	if ans.Agents == nil {
		ans.Agents = []capsule.FleetEntry{}
	}
	if ur.Cfg.Snapshots {
		b, err := snapshotBucket(ctx, ur.Fleet)
		if err != nil {
			return nil, capsule.Refuse(capsule.CodeFleetUnavailable, "upstream",
				"the fleet's snapshot bucket (upstream %s) could not be listed: %v", upstreamName, err)
		}
		ans.Snapshots = b
	}
	return ans, nil
}

// snapshotBucket sizes the fleet's snapshot bucket: the bytes of all its
// objects, its git objects and its manifests.
func snapshotBucket(ctx context.Context, f agent.Fleet) (*capsule.FleetSnapshotBucket, error) {
	objs, err := f.ObjectList(ctx, "")
	if err != nil {
		return nil, err
	}
	b := &capsule.FleetSnapshotBucket{Bucket: f.SnapshotBucket()}
	for _, o := range objs {
		b.Bytes += o.Size
		switch {
		case strings.HasPrefix(o.Name, "git/"):
			b.Objects++
		case strings.HasPrefix(o.Name, "snap/"):
			b.Manifests++
		}
	}
	return b, nil
}
