package ops

import (
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// The answers of the operations on the daemon as a whole and on an agent's
// dead letters: the daemon encodes them and the CLI decodes them, the same
// types.

// DeadLetterList is the answer to GET /v1/deadletter.
type DeadLetterList struct {
	Entries []DeadLetter `json:"entries"`
}

// DeadLetter is a write an upstream refused for good (a 4xx other than
// 408/429). It is kept, shown in resume and status, and can be retried or
// discarded by an operator; it is never dropped on its own.
type DeadLetter struct {
	Upstream string        `json:"upstream"`
	Write    capsule.Write `json:"write"`
	Error    string        `json:"error"`
	At       time.Time     `json:"at"`
	// Retry is set by an operator's retry: the outbox sends it again before
	// its pending writes.
	Retry    bool `json:"retry"`
	Attempts int  `json:"attempts"`
}

// DeadLettersRetried is the answer to POST /v1/deadletter/retry: how many
// dead letters are queued again.
type DeadLettersRetried struct {
	Retried int `json:"retried"`
}

// DeadLettersDiscarded is the answer to POST /v1/deadletter/discard: how
// many dead letters were dropped.
type DeadLettersDiscarded struct {
	Discarded int `json:"discarded"`
}

// HealthAnswer is the answer to GET /healthz.
type HealthAnswer struct {
	OK      bool   `json:"ok"`
	Version string `json:"version"`
}

// StatusAnswer is the answer to GET /v1/status and `continuityd status --json`.
type StatusAnswer struct {
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
	// UI is where the web page is served, once a login URL was asked
	// for (continuityd ui); absent before.
	UI *UIStatus `json:"ui,omitempty"`
	// Places are the projects sessions adopted, watched or not; Moved
	// says where state went when a place was configured by name (or an
	// agent renamed); Watches the inotify watches in use and the limit.
	Places  []PlaceStatus `json:"places,omitempty"`
	Moved   []PlaceMove   `json:"moved,omitempty"`
	Watches *WatchUse     `json:"watches,omitempty"`
}

// UIStatus is where the web page is served: the configured loopback
// listener (daemon.listen), or one the daemon opened for it on 127.0.0.1
// (OwnListener).
type UIStatus struct {
	URL         string `json:"url"`
	OwnListener bool   `json:"own_listener"`
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

// AgentStatus is one agent's line in StatusAnswer.
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
	Components []Component `json:"components"`
	// SnapshotProblem says why degraded names "snapshots".
	SnapshotProblem string `json:"snapshot_problem,omitempty"`
	// RestoreInterrupted is a restore of the work tree that was
	// interrupted, and the command that undoes it.
	RestoreInterrupted *capsule.RestoreInterrupted `json:"restore_interrupted,omitempty"`
	// Damaged is set for an agent refused because its files are damaged:
	// what was found and the way out. Such an agent is not served.
	Damaged string `json:"damaged,omitempty"`
	// FleetConflict lists other daemons writing this agent through a fleet
	// upstream; RestoredFrom says where its state came from when it was.
	FleetConflict []capsule.FleetConflict `json:"fleet_conflict,omitempty"`
	RestoredFrom  *capsule.RestoredFrom   `json:"restored_from,omitempty"`
	// FleetHandover is the agent's handover between daemons (`continuityd
	// fleet take`), on the side that took it and the side it was taken from.
	FleetHandover *capsule.FleetHandover `json:"fleet_handover,omitempty"`
}

// Component is how one of an agent's automatic parts is doing, for
// status: the workdir watch, the transcript follower, the work snapshots,
// the work-lost checks, the commits' receipts.
type Component struct {
	Name string `json:"name"` // watch, transcripts, snapshots, work_lost, commits, journal
	// State is ok, degraded (Detail says why) or off (not configured).
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// FleetAnswer is the answer to GET /v1/fleet and `continuityd fleet --json`:
// the agents a fleet upstream's bucket knows, and the upstream's health
// as this daemon sees it.
type FleetAnswer struct {
	Upstream string               `json:"upstream"`
	Stream   string               `json:"stream"`
	Bucket   string               `json:"bucket"`
	Health   capsule.FleetHealth  `json:"health"`
	Agents   []capsule.FleetEntry `json:"agents"`
	// Snapshots is the size of the fleet's snapshot bucket, when the
	// upstream carries work snapshots (snapshots = true).
	Snapshots *capsule.FleetSnapshotBucket `json:"snapshots,omitempty"`
}

// FleetTakeAnswer is the answer to POST /v1/fleet/take and `continuityd
// fleet take AGENT`: the handover this daemon made.
type FleetTakeAnswer struct {
	Agent    string                `json:"agent"`
	Handover capsule.FleetHandover `json:"handover"`
}

// UILoginAnswer is the answer to POST /v1/ui/login: the one-time URL, for
// the caller alone (it opens a session once, within ExpiresIn).
type UILoginAnswer struct {
	URL string `json:"url"`
	// Listener says what serves the page: "configured" (daemon.listen)
	// or "own" (a loopback listener the daemon opened for the page).
	Listener  string `json:"listener"`
	ExpiresIn string `json:"expires_in"`
}

// UIRevokeAnswer is the answer to POST /v1/ui/revoke.
type UIRevokeAnswer struct {
	Revoked int `json:"revoked"`
	// All says every user's sessions ended (root, the daemon's user);
	// else the caller's own.
	All bool `json:"all"`
}
