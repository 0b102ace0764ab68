package ops

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// The answers of the agent's own operations (checkpoint, wait, the
// capsule's writes, signals): daemon/agent answers with them, under its
// own names for them.

// CheckpointAnswer is the answer to a checkpoint: its sequence number, the
// saved state, and with sync what each upstream did.
type CheckpointAnswer struct {
	Seq   uint64           `json:"seq"`
	State json.RawMessage  `json:"state"` // capsule.Resume, as the store encoded it
	Sync  []SyncedUpstream `json:"sync,omitempty"`
}

// SyncedUpstream is what one upstream did with a synced checkpoint.
type SyncedUpstream struct {
	Name      string  `json:"name"`
	Delivered bool    `json:"delivered"`
	Refused   bool    `json:"refused,omitempty"` // refused for good: in the upstream's dead letter
	State     string  `json:"state"`
	Error     *string `json:"error"`
}

// JSONAround is the answer's encoding, as encoding/json would give it
// (with a trailing newline), less the state: head, then State, then tail.
// The state is most of the answer, and the store made it: it is written as
// it is, neither scanned nor copied again.
func (ans *CheckpointAnswer) JSONAround() (head, tail []byte, err error) {
	head = append(append([]byte(`{"seq":`), strconv.FormatUint(ans.Seq, 10)...), `,"state":`...)
	if len(ans.Sync) > 0 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(ans.Sync); err != nil {
			return nil, nil, err
		}
		tail = append([]byte(`,"sync":`), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	return head, append(tail, "}\n"...), nil
}

// The bounds of a long poll's max_seconds, and what it waits when none is
// given.
const (
	WaitDefault = 20
	WaitMax     = 90
)

// WaitAnswer is the answer to a long poll.
type WaitAnswer struct {
	Woke   string  `json:"woke"` // event or timeout
	Events []Event `json:"events"`
	Cursor uint64  `json:"cursor"`
	// Missed counts the events after the cursor passed in that the feed
	// no longer holds (too old, or upstream events that gave way to the
	// agent's own): a gap the caller can see.
	Missed uint64 `json:"missed"`
	Scope  string `json:"directions_scope"`
}

// Event is one event of the agent's feed, as a long poll answers it.
type Event struct {
	ID      uint64    `json:"id"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // checkpoint, capsule, capsule_seal, signal, activity, commit, direction, delivery_failed, work_lost
	Seq     uint64    `json:"seq,omitempty"`
	Origin  string    `json:"origin,omitempty"`
	Summary string    `json:"summary"`
	Data    any       `json:"data,omitempty"`
}

// CapsuleAnswer is the answer to capsule writes: the sequence number and
// the stored record.
type CapsuleAnswer struct {
	Seq     uint64                 `json:"seq"`
	Capsule *capsule.CapsuleRecord `json:"capsule"`
}

// SignalAnswer is the answer to a signal: its sequence number and the
// agent's context as it now stands.
type SignalAnswer struct {
	Seq     uint64               `json:"seq"`
	Context capsule.ContextState `json:"context"`
}
