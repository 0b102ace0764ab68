package ops

import (
	"encoding/json"

	"github.com/continuityd/continuityd/capsule"
)

// The request bodies of the operations that take one of their own (the
// others take the capsule package's Checkpoint, Capsule and Signal).
// capsule/guard decodes each, strictly, under its own names for them; the
// json tags name the fields as the body has them, for the clients that
// encode them and for what describes the body (the OpenAPI document, the
// MCP tools' input schemas).

// SealRequest is the body of POST /v1/capsule/seal: the fields the caller
// sets on the capsule the daemon builds from the residency. A field left
// out (or null) keeps what the residency gives.
type SealRequest struct {
	Goal      *string  `json:"goal,omitempty"`
	Done      *string  `json:"done,omitempty"`
	Next      *string  `json:"next,omitempty"`
	Blockers  *string  `json:"blockers,omitempty"`
	DoNot     *string  `json:"do_not,omitempty"`
	Refuted   *string  `json:"refuted,omitempty"`
	HandoffTo *string  `json:"handoff_to,omitempty"`
	Receipts  []string `json:"receipts,omitempty"`
	// TTLDays is the JSON text as it came; the capsule's checks check it
	// with the rest of the built capsule.
	TTLDays json.RawMessage `json:"ttl_days,omitempty"`
}

// Apply sets the request's fields on c, the capsule built to be sealed.
func (r *SealRequest) Apply(c *capsule.Capsule) {
	for dst, v := range map[*string]*string{
		&c.Goal: r.Goal, &c.Done: r.Done, &c.Next: r.Next, &c.Blockers: r.Blockers,
		&c.DoNot: r.DoNot, &c.Refuted: r.Refuted, &c.HandoffTo: r.HandoffTo,
	} {
		if v != nil {
			*dst = *v
		}
	}
	if r.Receipts != nil {
		c.Receipts = r.Receipts
	}
	if r.TTLDays != nil {
		c.TTLDays = r.TTLDays
	}
}

// TakeRequest is the body of POST /v1/snapshots: the message the snapshot
// is asked for with, one line of at most MaxTakeMessage characters, no
// control character and no credential (refused, naming "message").
type TakeRequest struct {
	Message string `json:"message,omitempty"`
}

// MaxTakeMessage bounds a snapshot's message, in characters.
const MaxTakeMessage = 500

// RestoreRequest is the body of POST /v1/snapshots/{id}/restore: the paths
// to bring back, or all of the tree (All), or, with neither, the paths the
// agent itself changed since the snapshot; and whether only to list what
// would change. In the body each path is in its exact form (a name that
// is not UTF-8 as "\377.txt", internal/termsafe's Exact); decoded, Paths
// are the names themselves.
type RestoreRequest struct {
	Paths  []string `json:"paths,omitempty"`
	All    bool     `json:"all,omitempty"`
	DryRun bool     `json:"dry_run,omitempty"`
}

// LostRestoreRequest is the body of POST
// /v1/continuity/work_lost/{id}/restore: whether only to list what would
// change. The loss names the snapshot and the paths.
type LostRestoreRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// DeadLetterRequest names the dead letters POST /v1/deadletter/retry and
// /v1/deadletter/discard act on: one (Seq) of Upstream's, or all of them
// (Seq 0).
type DeadLetterRequest struct {
	Upstream string `json:"upstream"`
	Seq      uint64 `json:"seq,omitempty"`
}
