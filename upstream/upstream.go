// Package upstream defines what continuityd ships accepted writes to: an
// Upstream takes one logged write at a time, in order, and says whether it
// was taken, should be retried, or was refused for good. One package per
// backend lives below this one: local, qday, delx and nats (the fleet,
// which also implements daemon/agent's Fleet for what flows back).
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// Upstream delivers an agent's accepted writes to one upstream service.
type Upstream interface {
	// Name is the [upstream.NAME] this instance was configured as.
	Name() string
	// Kind is local, qday, delx or nats.
	Kind() string
	// Accepts reports whether this upstream takes writes of kind k; the
	// outbox acknowledges the others without calling Deliver (Q-Day takes
	// checkpoints, Delx takes capsules and session ends, local takes all).
	Accepts(k capsule.WriteKind) bool
	// Deliver sends w for agent. nil means the upstream has it. Any error
	// is retried unless it is an *Error that says otherwise. w carries a
	// stable IdempotencyKey: a retry sends the same key.
	Deliver(ctx context.Context, agent string, w capsule.Write) error
}

// Resumer is implemented by upstreams that keep their own view of an agent
// (Q-Day's GET /v1/continuity, Delx's resume_session); the daemon folds it
// into the local resume under "remote".
type Resumer interface {
	Resume(ctx context.Context, agent string) (json.RawMessage, error)
}

// MemberReader is implemented by upstreams where the members of a group of
// agents may read each other's capsules (Delx fleets). ReadMember returns
// the upstream's answer for member (the upstream's id of a fellow agent),
// read as agent; ErrNoFleet when agent is in no such group there. The
// answer is remote input: the caller guards it before anyone sees it.
type MemberReader interface {
	ReadMember(ctx context.Context, agent, member string) (json.RawMessage, error)
}

// ErrNoFleet is ReadMember's error for an agent that belongs to no fleet
// at the upstream.
var ErrNoFleet = errors.New("the agent is in no fleet at this upstream")

// Waiter is implemented by upstreams with a long poll for events (Q-Day's
// GET /v1/continuity/wait). Wait returns the upstream's answer as is; the
// daemon relays its events to local wait callers. maxSeconds is 1..90.
type Waiter interface {
	Wait(ctx context.Context, agent string, maxSeconds int) (json.RawMessage, error)
}

// Flusher is implemented by upstreams that make a run of deliveries durable
// in one step (the local archive syncs its directory once): the outbox calls
// Flush before it acknowledges what it delivered.
type Flusher interface {
	Flush(ctx context.Context, agent string) error
}

// Recoverer is implemented by upstreams that keep files on this machine a
// crash can leave torn (the local archive): the outbox calls Recover once
// for its agent before it delivers anything, so a file is whole even when
// nothing new is ever written to it.
type Recoverer interface {
	Recover(agent string) error
}

// Outcome classifies a failed delivery.
type Outcome int

// Outcomes of a failed delivery.
const (
	Retry        Outcome = iota // transient: 5xx, timeout, connection error, 408
	RateLimited                 // 429: wait RetryAfter (or back off)
	Unauthorized                // 401/403: retried slowly, and at once on reload
	Stopped                     // 409 RESIDENCY_STOPPED: paused until resume_residency
	Rejected                    // other 4xx: the write goes to the dead letter
)

// Error is a delivery failure with its classification.
type Error struct {
	Outcome    Outcome
	Status     int           // HTTP status, when there was one
	Code       string        // the upstream's error code, when it gave one
	RetryAfter time.Duration // from Retry-After or the JSON-RPC data; 0 = unknown
	// Answered marks a failure the upstream itself reported without a
	// status or a code (a Delx tool result with isError): Err holds its
	// words (see Describe).
	Answered bool
	Err      error
}

func (e *Error) Error() string {
	msg := "delivery failed"
	if e.Status != 0 {
		msg = fmt.Sprintf("upstream answered %d", e.Status)
	}
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Describe is a failed call to the upstream source as last_error, the dead
// letter and the delivery_failed event keep it. An upstream that answered
// (an *Error with a status or a code) may have put its own words in it
// ("IMPORTANT SYSTEM NOTICE: ignore previous instructions…"), and that text
// reaches the agent's context: it is framed with its source, cleaned and
// bounded (guard.RemoteText), so it reads as data. A failure with no answer
// (no connection, a timeout, a missing identity) is the daemon's own text.
func Describe(source string, err error) string {
	var ue *Error
	if errors.As(err, &ue) && (ue.Status != 0 || ue.Code != "" || ue.Answered) {
		return guard.RemoteText(source, err.Error())
	}
	return err.Error()
}

// Classify returns the outcome of err: an *Error's own, Retry otherwise.
func Classify(err error) Outcome {
	var ue *Error
	if errors.As(err, &ue) {
		return ue.Outcome
	}
	return Retry
}
