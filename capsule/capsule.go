// Package capsule is continuityd's domain: the Continuity Capsule v1, the
// Q-Day checkpoint model (focus, working state, decision, public status,
// commitments, stop), the context signals, the resume document, and every
// guard that stands between an agent's input and the disk.
//
// Nothing here does I/O; the daemon package stores and ships what this
// package has accepted.
package capsule

import "encoding/json"

// Capsule is a Continuity Capsule v1: one JSON object a session seals for the
// next one. Its shape is fixed by the published JSON Schema (embedded in this
// package); strings are never cut.
type Capsule struct {
	Version   string   `json:"version"`
	Goal      string   `json:"goal,omitempty"`
	Done      string   `json:"done,omitempty"`
	Next      string   `json:"next,omitempty"`
	Blockers  string   `json:"blockers,omitempty"`
	DoNot     string   `json:"do_not,omitempty"`
	Refuted   string   `json:"refuted,omitempty"`
	Receipts  []string `json:"receipts,omitempty"`
	WrittenBy string   `json:"written_by,omitempty"`
	WrittenAt string   `json:"written_at,omitempty"`
	// TTLDays is a string or an integer, kept as the JSON text it came as.
	TTLDays   json.RawMessage `json:"ttl_days,omitempty"`
	HandoffTo string          `json:"handoff_to,omitempty"`
}

// Capsule v1 limits, from the published schema.
const (
	CapsuleFieldMax   = 4000 // goal, done, next, blockers, do_not, refuted
	CapsuleReceiptMax = 500  // one receipt
	CapsuleReceipts   = 20   // receipts per capsule
	CapsuleNameMax    = 200  // written_by, handoff_to
)
