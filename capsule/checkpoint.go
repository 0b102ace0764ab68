package capsule

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// Checkpoint is the body of POST /v1/continuity/checkpoint: the Q-Day
// checkpoint, any subset of its parts. It is decoded strictly and checked by
// a Guard before the residency store sees it.
type Checkpoint struct {
	Focus           *string        `json:"focus,omitempty" jsonschema:"what the agent is working on (at most 4000 characters)"`
	WorkingState    *WorkingState  `json:"working_state,omitempty" jsonschema:"the private note: fields left out keep their value"`
	Decide          *Decision      `json:"decide,omitempty" jsonschema:"one decision per checkpoint, with its reason"`
	PublicStatus    *PublicStatus  `json:"public_status,omitempty" jsonschema:"PUBLIC: shown in the Q-Day office; no secrets, no email addresses, links only to allowed domains"`
	Commitments     *CommitmentOps `json:"commitments,omitempty" jsonschema:"commitments to open, close (with evidence) and drop (with a reason)"`
	Stop            *Stop          `json:"stop,omitempty" jsonschema:"records a stop of the residency; every other field is ignored"`
	ResumeResidency bool           `json:"resume_residency,omitempty" jsonschema:"lifts a stop: only on a new operator instruction"`
}

// IsEmpty reports whether the checkpoint carries nothing at all.
func (c *Checkpoint) IsEmpty() bool {
	return c.Focus == nil && c.WorkingState == nil && c.Decide == nil && c.PublicStatus == nil &&
		(c.Commitments == nil || c.Commitments.IsEmpty()) && c.Stop == nil && !c.ResumeResidency
}

// WorkingState is the agent's private note. Fields left out of a checkpoint
// keep their stored value; result_ref and waiting_for may be set to null to
// clear them.
type WorkingState struct {
	NextAction *string        `json:"next_action,omitempty"`
	LastResult *string        `json:"last_result,omitempty"`
	ResultRef  NullableString `json:"result_ref,omitzero"`
	WaitingFor NullableString `json:"waiting_for,omitzero"`
}

// NullableString is a JSON string field that tells "absent" from "null" from
// a value: Set is true when the field was present, Valid when it was not null.
type NullableString struct {
	Set   bool
	Valid bool
	Value string
}

// IsZero reports whether the field was absent (for omitzero).
func (n NullableString) IsZero() bool { return !n.Set }

// UnmarshalJSON implements json.Unmarshaler.
func (n *NullableString) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Valid, n.Value = false, ""
		return nil
	}
	if err := json.Unmarshal(b, &n.Value); err != nil {
		return err
	}
	n.Valid = true
	return nil
}

// MarshalJSON implements json.Marshaler.
func (n NullableString) MarshalJSON() ([]byte, error) {
	if !n.Valid {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// Ptr returns the value as a pointer, nil for null.
func (n NullableString) Ptr() *string {
	if !n.Valid {
		return nil
	}
	v := n.Value
	return &v
}

// Decision is one `decide`: what was chosen, why (at least 24 characters) and
// what was passed over.
type Decision struct {
	Chosen     string `json:"chosen"`
	Because    string `json:"because" jsonschema:"why, in at least 24 characters"`
	PassedOver string `json:"passed_over,omitempty"`
}

// PublicStatus is the PUBLIC line the Q-Day office shows for the agent.
type PublicStatus struct {
	Phase      string `json:"phase" jsonschema:"acting, waiting or resting"`
	NextAction string `json:"next_action" jsonschema:"at most 280 characters"`
	Reason     string `json:"reason,omitempty"`
	// Until is an ISO time (a JSON string) or epoch milliseconds (a JSON
	// integer), kept as the JSON text it arrived as.
	Until      json.RawMessage `json:"until,omitempty" jsonschema:"an ISO time, or epoch milliseconds"`
	Tool       string          `json:"tool,omitempty"`
	Route      string          `json:"route,omitempty" jsonschema:"a path template, no query"`
	Experiment string          `json:"experiment,omitempty"`
}

// CommitmentOps opens, closes and drops commitments in one checkpoint.
type CommitmentOps struct {
	Open  []OpenCommitment  `json:"open,omitempty"`
	Close []CloseCommitment `json:"close,omitempty"`
	Drop  []DropCommitment  `json:"drop,omitempty"`
}

// IsEmpty reports whether no operation is present.
func (o *CommitmentOps) IsEmpty() bool {
	return len(o.Open) == 0 && len(o.Close) == 0 && len(o.Drop) == 0
}

// OpenCommitment opens a commitment with a title of at least 3 characters.
type OpenCommitment struct {
	Title string `json:"title" jsonschema:"at least 3 characters"`
}

// CloseCommitment closes an open commitment with evidence "post:UUID".
type CloseCommitment struct {
	ID       string `json:"id"`
	Evidence string `json:"evidence" jsonschema:"post:UUID of a message the agent wrote"`
}

// DropCommitment abandons an open commitment with a reason of at least 8
// characters; the record stays visible.
type DropCommitment struct {
	ID     string `json:"id"`
	Reason string `json:"reason" jsonschema:"at least 8 characters"`
}

// Stop records a stop of the residency. A checkpoint carrying it ignores
// every other field.
type Stop struct {
	Reason string `json:"reason"`
}

// WriteKind names what an accepted write was; the outbox ships each kind to
// the upstreams that take it.
type WriteKind string

// Kinds of accepted writes.
const (
	WriteCheckpoint WriteKind = "checkpoint"
	WriteCapsule    WriteKind = "capsule"      // PUT /v1/capsule
	WriteSeal       WriteKind = "capsule_seal" // POST /v1/capsule/seal
	// WriteSessionEnd records that the agent's session ended (Delx:
	// close_session), with the capsule sealed for it when there is one.
	WriteSessionEnd WriteKind = "session_end"
)

// Origin tells who wrote: the agent itself (explicit) or the daemon's own
// policy (automatic). Automatic writes never overwrite newer explicit ones.
type Origin string

// Origins of writes.
const (
	OriginExplicit  Origin = "explicit"
	OriginAutomatic Origin = "automatic"
)

// Write is one accepted write as the residency log keeps it: the unit the
// outbox ships upstream, in Seq order, under a stable IdempotencyKey.
type Write struct {
	Seq            uint64      `json:"seq"`
	Kind           WriteKind   `json:"kind"`
	Origin         Origin      `json:"origin"`
	At             time.Time   `json:"at"`
	IdempotencyKey string      `json:"idempotency_key"`
	Checkpoint     *Checkpoint `json:"checkpoint,omitempty"`
	Capsule        *Capsule    `json:"capsule,omitempty"`
	// Work is what a work record (WriteWork) carries; its Checkpoint, when
	// set, is the part Q-Day may take.
	Work *Work `json:"work,omitempty"`
	// CoveredFrom is set on a call the outbox merged from a run of
	// state-only checkpoints: the run's first seq (Seq is its last, and the
	// IdempotencyKey is the last write's).
	CoveredFrom uint64 `json:"covered_from,omitempty"`
	// SessionID and Reason describe a session end (WriteSessionEnd).
	SessionID string `json:"session_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ErrStaleState is returned for a conditional write (an automatic
// checkpoint built from a read of the state) when the state changed after
// that read: the writer reads again and decides afresh, so what it derived
// never overwrites a newer write of the agent's.
var ErrStaleState = errors.New("the state changed since it was read")
