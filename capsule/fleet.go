package capsule

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A fleet upstream (kind "nats") is a two-way sync: beside the writes it
// ships, it keeps each agent's latest state for a restore on another
// machine, reports another daemon writing the same agent, lists the agents
// it knows and stores work snapshots. The types below are what it speaks;
// daemon/agent's Fleet interface says what is asked of it, and
// upstream/nats answers.

// RestoredFrom says where an agent's state came from when its local state
// was empty and a fleet upstream held it (resume "restored_from").
type RestoredFrom struct {
	Upstream   string    `json:"upstream"`
	Machine    string    `json:"machine"`            // the daemon that last wrote it
	Instance   string    `json:"instance,omitempty"` // that daemon's state directory, hashed
	At         time.Time `json:"at"`                 // when it wrote the state
	AgeSeconds int64     `json:"age_seconds"`        // how old the state was when restored
	Revision   uint64    `json:"revision"`
	Seq        uint64    `json:"seq"`      // the log seq the state included
	LastSeq    uint64    `json:"last_seq"` // the fleet's last write; new writes follow it
	Replayed   int       `json:"replayed"` // writes after the state, replayed
	// Merged is set when the fleet came back after local writes were made:
	// they were kept, and the fleet filled in only what they had not set.
	Merged     bool      `json:"merged,omitempty"`
	RestoredAt time.Time `json:"restored_at"`
	// PreviousWriterRecent is set when another daemon wrote the state
	// within the conflict window: it may still be running.
	PreviousWriterRecent bool `json:"previous_writer_recent,omitempty"`
}

// FleetConflict is another daemon seen writing the same agent through a
// fleet upstream (resume and status "fleet_conflict"). Neither overwrites
// the other's state: Held says whose state the fleet's agent key holds.
type FleetConflict struct {
	Upstream string    `json:"upstream"`
	Machine  string    `json:"machine"`
	Instance string    `json:"instance,omitempty"`
	Held     bool      `json:"held"` // true: this daemon's state is the fleet's
	Seq      uint64    `json:"seq"`  // the other writer's latest seq
	At       time.Time `json:"at"`   // its latest sign of life
}

// ErrFleetConflict is matched (errors.Is) by every *FleetConflictError.
var ErrFleetConflict = errors.New("another daemon is writing this agent")

// FleetConflictError says another daemon (Machine, Instance) writes the
// same agent through a fleet. Neither side's state is overwritten: the
// daemon that holds the agent's key (Held) keeps writing it; the other
// keeps its state apart, until an operator stops one of them (or
// deliberately takes the key over by writing at Revision). It is the data
// of the agent's fleet_conflict event.
type FleetConflictError struct {
	Agent    string    `json:"agent"`
	Machine  string    `json:"machine"`            // the other writer
	Instance string    `json:"instance,omitempty"` // the other writer's instance, if it gave one
	Revision uint64    `json:"revision"`           // the agent key's revision when seen
	Seq      uint64    `json:"seq"`                // the other writer's latest log seq
	At       time.Time `json:"at"`                 // the other writer's latest write of its state
	// Held is true when this daemon's state is the agent key's (the other
	// writer's is kept apart), false when the other's is.
	Held bool `json:"held"`
}

func (e *FleetConflictError) Error() string {
	who := e.Machine
	if e.Instance != "" {
		who += " (" + e.Instance + ")"
	}
	if e.Held {
		return fmt.Sprintf("agent %s: %s is writing this agent too (its state is kept apart, seq %d at %s); stop one of the two daemons",
			e.Agent, who, e.Seq, e.At.Format(time.RFC3339))
	}
	return fmt.Sprintf("agent %s: %s wrote this agent's fleet state since this daemon did (revision %d, seq %d at %s); this daemon's state is kept apart and not written over it; stop one of the two daemons",
		e.Agent, who, e.Revision, e.Seq, e.At.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrFleetConflict) true.
func (e *FleetConflictError) Is(target error) bool { return target == ErrFleetConflict }

// FleetHandover is an agent handed from one daemon to another through a
// fleet upstream (`continuityd fleet take`), as resume and status show it
// on both sides: the daemon that took it (Here "taken") writes the agent
// from then on; the one it was taken from (Here "given"), if it comes
// back, stops writing it, refuses writes with AGENT_HANDED_OVER and says
// so, so that one daemon writes the agent and nothing is merged silently.
type FleetHandover struct {
	Upstream string `json:"upstream"`
	Agent    string `json:"agent"`
	// Here is "taken" on the daemon that took the agent, "given" on the
	// one it was taken from.
	Here string `json:"here"`
	// From is the writer it was taken from (machine, and the instance
	// when it gave one); empty when the fleet named none.
	From         string `json:"from,omitempty"`
	FromMachine  string `json:"from_machine,omitempty"`
	FromInstance string `json:"from_instance,omitempty"`
	// FromAt is From's latest sign of life in the fleet when it was taken.
	FromAt     time.Time `json:"from_at,omitzero"`
	To         string    `json:"to"`
	ToMachine  string    `json:"to_machine"`
	ToInstance string    `json:"to_instance,omitempty"`
	At         time.Time `json:"at"`       // when it was taken
	Revision   uint64    `json:"revision"` // the agent key's revision the take wrote
	Seq        uint64    `json:"seq"`      // the log seq of the state the taker wrote
	Forced     bool      `json:"forced,omitempty"`
}

// Handover is "taken" or "given": see FleetHandover.Here.
const (
	HandoverTaken = "taken"
	HandoverGiven = "given"
)

// ErrFleetHandedOver is matched (errors.Is) by the error of a fleet write
// for an agent another daemon took over: this daemon writes it no more.
var ErrFleetHandedOver = errors.New("another daemon took this agent over")

// FleetHandedOverError says the agent was taken over by another daemon.
type FleetHandedOverError struct{ Handover FleetHandover }

func (e *FleetHandedOverError) Error() string {
	h := e.Handover
	return fmt.Sprintf("agent %s was taken over by %s at %s (continuityd fleet take, fleet revision %d); this daemon no longer writes it",
		h.Agent, h.To, h.At.Format(time.RFC3339), h.Revision)
}

// Is makes errors.Is(err, ErrFleetHandedOver) true.
func (e *FleetHandedOverError) Is(target error) bool { return target == ErrFleetHandedOver }

// FleetTakeError is a refused take: Why says why, for people, naming the
// writer, the bound and the way out.
type FleetTakeError struct {
	Agent string
	// Recent is set when the other writer was seen within Window; Lost
	// when another daemon wrote the agent's key between the read and the
	// write (two takers at once: the other won); otherwise there is
	// nothing to take.
	Recent, Lost bool
	Writer       string
	SeenAt       time.Time
	Window       time.Duration
	Why          string
}

func (e *FleetTakeError) Error() string { return e.Why }

// FleetState is what a fleet holds of an agent: its latest state document
// and where its writes end. Writes after Seq (up to LastSeq) are in the
// fleet's log: replaying them from Seq+1 catches the state up.
type FleetState struct {
	Agent string `json:"agent"`
	// Found is false when the fleet has no state for the agent (LastSeq
	// may still say writes reached its log).
	Found bool `json:"found"`
	// State is the document as its writer put it (a resume document),
	// untrusted: it passes the guard before anything of it is kept.
	State    json.RawMessage `json:"state,omitempty"`
	Revision uint64          `json:"revision"` // the state's revision: the next write of it names it
	Machine  string          `json:"machine,omitempty"`
	Instance string          `json:"instance,omitempty"`
	// Self is set when this daemon wrote the state (same machine and
	// instance): it is no other writer's.
	Self    bool          `json:"self,omitempty"`
	Seq     uint64        `json:"seq"`              // the log seq the state includes
	At      time.Time     `json:"at,omitzero"`      // when it was put
	Age     time.Duration `json:"age"`              // how long ago
	LastSeq uint64        `json:"last_seq"`         // the latest write's log seq in the fleet
	LastAt  time.Time     `json:"last_at,omitzero"` // when the fleet stored it
	// Conflicts are the states other writers kept apart.
	Conflicts []FleetConflictError `json:"conflicts,omitempty"`
}

// FleetEntry is one agent a fleet knows (GET /v1/fleet).
type FleetEntry struct {
	Agent           string          `json:"agent"`
	Machine         string          `json:"machine"`
	Instance        string          `json:"instance,omitempty"`
	Revision        uint64          `json:"revision"`
	Seq             uint64          `json:"seq"`
	UpdatedAt       time.Time       `json:"updated_at"`           // when its state was put
	LastWrite       *time.Time      `json:"last_write,omitempty"` // its latest accepted write
	ContextFraction *float64        `json:"context_fraction,omitempty"`
	PublicPhase     string          `json:"public_phase,omitempty"`
	Upstreams       json.RawMessage `json:"upstreams,omitempty"` // its upstreams' health as its daemon reported it
	// ConflictWith names other writers whose kept-apart states are fresh.
	ConflictWith []string `json:"conflict_with,omitempty"`
}

// FleetHealth is a fleet upstream's connection as this daemon sees it, for
// status and `continuityd fleet`.
type FleetHealth struct {
	Connected  bool   `json:"connected"`
	State      string `json:"state"`            // connected, reconnecting, connecting, closed, ...
	Server     string `json:"server,omitempty"` // without credentials
	Reconnects uint64 `json:"reconnects"`
	LastError  string `json:"last_error,omitempty"`
}

// ErrFleetObjectMissing is wrapped by a fleet's answer for a snapshot
// object it does not hold.
var ErrFleetObjectMissing = errors.New("no such object in the fleet's snapshot bucket")

// ErrFleetObjectDamaged is wrapped by the errors of a fleet's reader whose
// content does not match the digest the fleet recorded for it.
var ErrFleetObjectDamaged = errors.New("the object's content does not match the digest the bucket recorded")

// ErrFleetObjectChanged is wrapped by a fleet's answer to a touch or a
// delete of a snapshot object that was written (put, touched or deleted)
// since the caller looked at it: the caller looks again.
var ErrFleetObjectChanged = errors.New("the object changed in the fleet's snapshot bucket since it was looked at")

// FleetObject is one object of a fleet's snapshot bucket as a lookup or a
// listing sees it. Seq is its record's position in the bucket (what a
// touch or a delete must still find: 0 when a listing does not say) and
// At the fleet server's time of its last put or touch.
type FleetObject struct {
	Name string    `json:"name"`
	Size int64     `json:"size"`
	Seq  uint64    `json:"seq,omitempty"`
	At   time.Time `json:"at"`
}

// FleetSnapshotBucket is the size of a fleet's snapshot bucket, for
// `continuityd fleet`: the bytes of its objects (git objects and
// manifests), how many git objects and how many manifests (snapshots).
type FleetSnapshotBucket struct {
	Bucket    string `json:"bucket"`
	Bytes     int64  `json:"bytes"`
	Objects   int    `json:"objects"`
	Manifests int    `json:"manifests"`
}
