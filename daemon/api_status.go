package daemon

import (
	"net/http"
	"os"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// handleSignal is POST /v1/signals.
func (d *Daemon) handleSignal(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	sig, err := st.guard.DecodeSignal(body)
	if err != nil {
		writeError(w, err)
		return
	}
	seq, err := a.store.Signal(r.Context(), sig)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "context": a.store.Resume(false).Context})
}

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
	// Damaged is set for an agent refused because its files are damaged:
	// what was found and the way out. Such an agent is not served.
	Damaged string `json:"damaged,omitempty"`
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	snap := d.snap()
	cfg := snap.cfg
	st := Status{
		Version: d.version, PID: os.Getpid(), StartedAt: d.started,
		UptimeSec: int64(time.Since(d.started).Seconds()),
		Socket:    cfg.Daemon.Socket, Listen: cfg.Daemon.Listen, StateDir: cfg.Daemon.StateDir,
		Config: configName(cfg), Agents: []AgentStatus{},
	}
	for _, ac := range cfg.Agents {
		name := ac.Name
		if err := snap.damaged[name]; err != nil {
			st.Agents = append(st.Agents, AgentStatus{Name: name, Workdir: ac.Workdir, Upstreams: []capsule.UpstreamState{},
				Degraded: []string{"residency"}, Refused: []capsule.Refusal{}, Damaged: err.Error()})
			continue
		}
		a := snap.agents[name]
		if a == nil {
			continue // could not be opened; the reload's log says why
		}
		res := a.store.Resume(false)
		res.Upstreams = a.upstreamStates()
		st.Agents = append(st.Agents, AgentStatus{
			Name: name, Workdir: a.cfg.Workdir, Seq: res.Seq, Stopped: res.Stopped != nil,
			LastWriteAt: res.LastWriteAt, Context: res.Context, Upstreams: res.Upstreams,
			Degraded: res.Degraded, Refused: res.Refused,
		})
	}
	writeJSON(w, http.StatusOK, st)
}
