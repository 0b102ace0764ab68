package capsule

import (
	"encoding/json"
	"time"
)

// Resume is the answer to GET /v1/continuity: where the agent was. The
// residency store fills the durable part; the daemon adds the upstream view
// (upstreams, degraded, directions) at read time.
type Resume struct {
	Agent          string              `json:"agent"`
	Seq            uint64              `json:"seq"`
	Focus          string              `json:"focus"`
	FocusUpdatedAt *time.Time          `json:"focus_updated_at"`
	WorkingState   *WorkingStateRecord `json:"working_state"`
	Commitments    []Commitment        `json:"commitments"`
	Decisions      []DecisionRecord    `json:"decisions"`
	PublicStatus   *PublicStatusRecord `json:"public_status"`
	Stopped        *StopRecord         `json:"stopped"`
	Capsule        *CapsuleRecord      `json:"capsule"`
	Receipts       []string            `json:"receipts"`
	// Plan is the agent's own plan, as its transcript states it (Claude
	// Code's TodoWrite and task tools, Codex's update_plan).
	Plan          []PlanStep `json:"plan"`
	PlanUpdatedAt *time.Time `json:"plan_updated_at,omitempty"`
	// Snapshot is the latest work snapshot (the daemon fills it at read
	// time); null before the first or with snapshots off.
	Snapshot       *SnapshotRef          `json:"snapshot"`
	SinceLastVisit SinceLastVisit        `json:"since_last_visit"`
	Context        ContextState          `json:"context"`
	LastWriteAt    *time.Time            `json:"last_write_at"`
	Refused        []Refusal             `json:"refused"`
	Upstreams      []UpstreamState       `json:"upstreams"`
	Degraded       []string              `json:"degraded"`
	Directions     []json.RawMessage     `json:"directions"`
	Remote         map[string]RemoteView `json:"remote,omitempty"`
	// RestoredFrom, FleetConflict and FleetHandover: see capsule/fleet.go.
	RestoredFrom  *RestoredFrom   `json:"restored_from,omitempty"`
	FleetConflict []FleetConflict `json:"fleet_conflict,omitempty"`
	FleetHandover *FleetHandover  `json:"fleet_handover,omitempty"`
	// Conflicts are the paths this agent and another both changed
	// (capsule/attribution.go).
	Conflicts []PathConflict `json:"conflicts"`
	// WorkLost is uncommitted work that vanished (capsule/worklost.go),
	// oldest first; the daemon fills it at read time.
	WorkLost []WorkLost `json:"work_lost,omitempty"`
	// RestoreInterrupted is a restore of the work tree that was
	// interrupted (capsule/restoreinterrupted.go); the daemon fills it at
	// read time.
	RestoreInterrupted *RestoreInterrupted `json:"restore_interrupted,omitempty"`
}

// WorkingStateRecord is the stored private note with its timestamp.
type WorkingStateRecord struct {
	NextAction string    `json:"next_action"`
	LastResult string    `json:"last_result"`
	ResultRef  *string   `json:"result_ref"`
	WaitingFor *string   `json:"waiting_for"`
	UpdatedAt  time.Time `json:"updated_at"`
	Origin     Origin    `json:"origin"`
	// Lost names the loss (a work_lost id) that took the work this result
	// reports: its files vanished without a commit after it was written.
	// The daemon sets it at read time; it is never stored.
	Lost string `json:"lost,omitempty"`
}

// Commitment states.
const (
	CommitmentOpen    = "open"
	CommitmentClosed  = "closed"
	CommitmentDropped = "dropped"
)

// Commitment is one commitment with its whole history.
type Commitment struct {
	ID       string            `json:"id"`
	Title    string            `json:"title"`
	Status   string            `json:"status"`
	OpenedAt time.Time         `json:"opened_at"`
	Evidence string            `json:"evidence,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	History  []CommitmentEvent `json:"history"`
}

// CommitmentEvent is one step in a commitment's life.
type CommitmentEvent struct {
	At     time.Time `json:"at"`
	Action string    `json:"action"` // open, close, drop
	Seq    uint64    `json:"seq"`
	Detail string    `json:"detail,omitempty"`
}

// DecisionRecord is a stored decision.
type DecisionRecord struct {
	Decision
	At  time.Time `json:"at"`
	Seq uint64    `json:"seq"`
}

// PublicStatusRecord is the stored public status with its timestamp.
type PublicStatusRecord struct {
	PublicStatus
	UpdatedAt time.Time `json:"updated_at"`
}

// StopRecord says the residency is stopped, why and since when.
type StopRecord struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// CapsuleRecord is the latest capsule and how it got there.
type CapsuleRecord struct {
	Capsule  Capsule   `json:"capsule"`
	StoredAt time.Time `json:"stored_at"`
	Sealed   bool      `json:"sealed"`
	Seq      uint64    `json:"seq"`
	// FleetMember is set on a fellow Delx fleet member's capsule (GET
	// /v1/capsule?fleet_member=): it came from a remote service, passed the
	// guards for remote text and the schema, and StoredAt is when Delx says
	// it was written; Seq and Sealed are not the agent's.
	FleetMember *FleetMemberSource `json:"fleet_member,omitempty"`
}

// FleetMemberSource is where a fellow fleet member's capsule came from.
type FleetMemberSource struct {
	Upstream string `json:"upstream"`
	FleetID  string `json:"fleet_id"`
	AgentID  string `json:"agent_id"`
	// Source frames the capsule as remote data, never the user's words.
	Source string `json:"source"`
}

// SinceLastVisit accumulates what happened since the agent last read its
// resume; reading the resume resets it.
type SinceLastVisit struct {
	Since  time.Time `json:"since"`
	Writes int       `json:"writes"`
	// Paths are the changed paths, each once, the most recently changed
	// last (at most 100); PathCounts says how many times each changed.
	// PathCount is the total of path changes, listed or not (a path
	// changed in two bursts of activity counts twice).
	Paths      []string       `json:"paths"`
	PathCount  int            `json:"path_count"`
	PathCounts map[string]int `json:"path_counts"`
	Commits    []string       `json:"commits"`
	Signals    []SignalNote   `json:"signals"`
	// ByOthers are the paths another agent or someone outside changed
	// since the agent's last visit (capsule/attribution.go).
	ByOthers []ByOther `json:"by_others"`
	// Head lists how the workdir's HEAD moved other than by a new commit
	// (which Commits lists): a branch switch, a reset, a rebase, a pull,
	// oldest first, including moves made while the daemon was down.
	Head []HeadMove `json:"head"`
}

// HeadMove is HEAD moving in one of the workdir's repositories without a
// new commit on top of it. Kind is "branch_switch" (HEAD names another
// branch, or is detached) or "moved" (the same branch now points at
// another commit: reset, rebase, pull). From and To are short commit ids;
// Summary is the one line a person reads, its commit subject redacted.
type HeadMove struct {
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Repo       string    `json:"repo"`
	Branch     string    `json:"branch"`
	PrevBranch string    `json:"prev_branch,omitempty"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Summary    string    `json:"summary"`
}

// HeadMove kinds.
const (
	HeadBranchSwitch = "branch_switch"
	HeadMoved        = "moved"
)

// SignalNote is a signal as since_last_visit shows it.
type SignalNote struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Summary string    `json:"summary"`
}

// ContextState is the latest known state of the agent's context window.
type ContextState struct {
	UsedFraction *float64 `json:"used_fraction"`
	// Via is where UsedFraction came from (the context signal's via:
	// transcript, statusline, hook, cli): a status line that shows the
	// daemon's figure says whose it is.
	Via         string     `json:"via,omitempty"`
	Compactions int        `json:"compactions"`
	SessionID   string     `json:"session_id,omitempty"`
	Session     string     `json:"session,omitempty"` // last session event: start, end, stop
	UpdatedAt   *time.Time `json:"updated_at"`
}

// Refusal is an automatic input (a handoff file, say) or a part of what
// came from another machine (the fleet's state, a replayed write) that
// failed the guards and was not stored; shown so the agent can fix it, or
// see what the fleet held that it was not given. Error names the rule
// (code), the part (field) and why.
type Refusal struct {
	Source string `json:"source"`
	// Machine is the daemon that wrote what came from the fleet (its
	// machine name, cleaned); empty for a local input.
	Machine string    `json:"machine,omitempty"`
	At      time.Time `json:"at"`
	Error   Error     `json:"error"`
}

// UpstreamState is one upstream's delivery state as resume and status show it.
type UpstreamState struct {
	Name        string     `json:"name"`
	Kind        string     `json:"kind"`
	State       string     `json:"state"` // ok, retrying, paused, unauthorized, rejected
	Pending     int        `json:"pending"`
	DeadLetter  int        `json:"dead_letter"`
	Delivered   uint64     `json:"delivered_seq"`
	LastError   *string    `json:"last_error"`
	LastSuccess *time.Time `json:"last_success"`
	NextAttempt *time.Time `json:"next_attempt"`
}

// Upstream states.
const (
	UpstreamOK           = "ok"
	UpstreamRetrying     = "retrying"
	UpstreamPaused       = "paused"
	UpstreamUnauthorized = "unauthorized"
	UpstreamRejected     = "rejected"
)

// RemoteView is what an upstream's own resume said, folded into ours.
type RemoteView struct {
	FetchedAt time.Time       `json:"fetched_at"`
	Body      json.RawMessage `json:"body"`
}
