package daemon

import (
	"os"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
)

// The daemon is the API's Runtime: the running configuration's agents and
// guard, and its status.

// Agent picks the agent a request names (api.Runtime).
func (d *Daemon) Agent(name, cwd string) (*agent.Agent, *guard.Guard, error) {
	st := d.snap()
	a, choice := st.agentFor(name, cwd)
	if choice != nil {
		return nil, nil, choice
	}
	return a, st.guard, nil
}

// AgentConfig is the running configuration of the agent named
// (api.Runtime).
func (d *Daemon) AgentConfig(name string) (config.Agent, bool) {
	if ac, ok := d.snap().cfg.Agent(name); ok {
		return ac, true
	}
	return d.placeConfig(name) // a place not watched now
}

// Status is the daemon's state (api.Runtime).
func (d *Daemon) Status() api.Status {
	snap := d.snap()
	cfg := snap.cfg
	st := api.Status{
		Version: d.version, PID: os.Getpid(), StartedAt: d.started,
		UptimeSec: int64(time.Since(d.started).Seconds()),
		Socket:    cfg.Daemon.Socket, Listen: cfg.Daemon.Listen, StateDir: cfg.Daemon.StateDir,
		Config: configName(cfg), Agents: []api.AgentStatus{}, LastReload: d.lastReload.Load(),
	}
	if page := d.page.Load(); page != nil {
		if base, own := page.Listening(); base != "" {
			st.UI = &api.UIStatus{URL: base + "/ui/", OwnListener: own}
		}
	}
	for _, ac := range cfg.Agents {
		name := ac.Name
		if err := snap.damaged[name]; err != nil {
			st.Agents = append(st.Agents, api.AgentStatus{Name: name, Workdir: ac.Workdir, Upstreams: []capsule.UpstreamState{},
				Degraded: []string{"residency"}, Refused: []capsule.Refusal{}, Damaged: err.Error()})
			continue
		}
		a := snap.agents[name]
		if a == nil {
			continue // could not be opened; the reload's log says why
		}
		res := a.LocalResume()
		st.Agents = append(st.Agents, api.AgentStatus{
			Name: name, Workdir: a.Config().Workdir, Seq: res.Seq, Stopped: res.Stopped != nil,
			LastWriteAt: res.LastWriteAt, Context: res.Context, Upstreams: res.Upstreams,
			Degraded: res.Degraded, Refused: res.Refused, Components: append(a.Capture().Health(), a.JournalHealth()), FleetConflict: res.FleetConflict, RestoredFrom: res.RestoredFrom, FleetHandover: res.FleetHandover,
			SnapshotProblem: a.SnapshotProblem(), RestoreInterrupted: res.RestoreInterrupted,
		})
	}
	d.placesStatus(snap, &st)
	return st
}
