package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/capture"
)

// Status is the answer to GET /v1/status and `continuityd status --json`.
type Status struct {
	Version   string        `json:"version"`
	PID       int           `json:"pid"`
	StartedAt time.Time     `json:"started_at"`
	UptimeSec int64         `json:"uptime_seconds"`
	Socket    string        `json:"socket"`
	Listen    string        `json:"listen,omitempty"`
	StateDir  string        `json:"state_dir"`
	Config    string        `json:"config"`
	Agents    []AgentStatus `json:"agents"`
	// LastReload is how the last configuration reload went; absent
	// before any.
	LastReload *ReloadStatus `json:"last_reload,omitempty"`
}

// ReloadStatus is the outcome of a configuration reload (SIGHUP, or the
// file changed).
type ReloadStatus struct {
	At time.Time `json:"at"`
	// Outcome is ok, refused (the file is invalid: the running
	// configuration stays) or partial (some agents could not start).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// AgentStatus is one agent's line in Status.
type AgentStatus struct {
	Name        string                  `json:"name"`
	Workdir     string                  `json:"workdir"`
	Seq         uint64                  `json:"seq"`
	Stopped     bool                    `json:"stopped"`
	LastWriteAt *time.Time              `json:"last_write_at"`
	Context     capsule.ContextState    `json:"context"`
	Upstreams   []capsule.UpstreamState `json:"upstreams"`
	Degraded    []string                `json:"degraded"`
	Refused     []capsule.Refusal       `json:"refused"`
	// Components says how the workdir watch, the transcript follower and
	// the work snapshots are doing: ok, degraded (with why) or off.
	Components []capture.Component `json:"components"`
	// SnapshotProblem says why degraded names "snapshots".
	SnapshotProblem string `json:"snapshot_problem,omitempty"`
	// Damaged is set for an agent refused because its files are damaged:
	// what was found and the way out. Such an agent is not served.
	Damaged string `json:"damaged,omitempty"`
	// FleetConflict lists other daemons writing this agent through a fleet
	// upstream; RestoredFrom says where its state came from when it was.
	FleetConflict []capsule.FleetConflict `json:"fleet_conflict,omitempty"`
	RestoredFrom  *capsule.RestoredFrom   `json:"restored_from,omitempty"`
}

// handleStatus answers the daemon's state; a peer on the socket sees only
// the agents it may use.
func (a *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := a.o.Runtime.Status()
	if p := peerOf(r.Context()); p != nil {
		st.Agents = slices.DeleteFunc(st.Agents, func(as AgentStatus) bool {
			ac, ok := a.o.Runtime.AgentConfig(as.Name)
			return !ok || p.mayUse(ac) != nil
		})
	}
	writeJSON(w, http.StatusOK, st)
}
