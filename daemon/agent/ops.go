package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/outbox"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/ops"
)

// The agent's operations. Each takes the request body as it came (the
// guard decodes it strictly) and returns the answer the API sends, of the
// types internal/ops declares with the operations.

// Wait bounds, from the Q-Day seed.
const (
	WaitDefault = ops.WaitDefault
	WaitMax     = ops.WaitMax
	// syncTimeout bounds a checkpoint with sync: how long it waits for its
	// upstreams before answering with what it knows.
	syncTimeout = 10 * time.Second
)

// The answers of the agent's operations.
type (
	CheckpointAnswer = ops.CheckpointAnswer
	SyncedUpstream   = ops.SyncedUpstream
	WaitAnswer       = ops.WaitAnswer
	CapsuleAnswer    = ops.CapsuleAnswer
	SignalAnswer     = ops.SignalAnswer
)

// Checkpoint stores the agent's own checkpoint (the Q-Day body, checked by
// g) durably and, with sync, waits (bounded) for the upstreams to take it.
func (a *Agent) Checkpoint(ctx context.Context, g *guard.Guard, body []byte, sync bool) (*CheckpointAnswer, error) {
	if err := a.handedOver(); err != nil {
		return nil, err
	}
	cp, err := g.DecodeCheckpoint(body)
	if err != nil {
		return nil, err
	}
	seq, err := a.store.Checkpoint(ctx, cp, capsule.OriginExplicit)
	if err != nil {
		return nil, err
	}
	ans := &CheckpointAnswer{Seq: seq}
	if sync {
		ans.Sync = a.waitSynced(ctx, seq)
	}
	// The saved state, from the residency alone: an answer to a write never
	// waits on an upstream's own view (resume has that).
	if ans.State, err = a.store.StateJSON(); err != nil {
		return nil, capsule.Refuse(capsule.CodeInternal, "",
			"the write was stored (seq %d) but the answer could not be encoded: %v", seq, err)
	}
	return ans, nil
}

// waitSynced waits (bounded) for every upstream to take seq.
func (a *Agent) waitSynced(ctx context.Context, seq uint64) []SyncedUpstream {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	out := make([]SyncedUpstream, len(a.shippers))
	done := make(chan struct{})
	for i, s := range a.shippers {
		go func() {
			defer func() { done <- struct{}{} }()
			err := s.WaitDelivered(ctx, seq)
			st := s.State()
			out[i] = SyncedUpstream{Name: st.Name, Delivered: err == nil, State: st.State, Error: st.LastError}
			var refused *outbox.RefusedError
			if errors.As(err, &refused) {
				out[i].Refused, out[i].Error = true, &refused.Reason
			}
		}()
	}
	for range a.shippers {
		<-done
	}
	return out
}

// Wait waits up to seconds (1..WaitMax; 0 means WaitDefault) for the
// agent's next event; with the cursor of a previous answer (after) it
// returns what happened since, at once if anything did.
func (a *Agent) Wait(ctx context.Context, seconds int, after *uint64) (WaitAnswer, error) {
	if seconds == 0 {
		seconds = WaitDefault
	}
	if seconds < 1 || seconds > WaitMax {
		return WaitAnswer{}, WaitSecondsError()
	}
	from := a.feed.Cursor()
	if after != nil {
		from = *after
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	evs, cursor, missed := a.feed.Wait(ctx, from)
	ans := WaitAnswer{Woke: "event", Events: make([]ops.Event, len(evs)), Cursor: cursor, Missed: missed, Scope: "agent_events"}
	for i, e := range evs {
		ans.Events[i] = ops.Event{ID: e.ID, At: e.At, Kind: e.Kind, Seq: e.Seq, Origin: e.Origin, Summary: e.Summary, Data: e.Data}
	}
	if len(evs) == 0 {
		ans.Woke = "timeout"
	}
	return ans, nil
}

// WaitSecondsError is the refusal of a wait length out of bounds.
func WaitSecondsError() *capsule.Error {
	return capsule.Refuse(capsule.CodeInvalidQuery, "max_seconds", "max_seconds must be an integer from 1 to %d", WaitMax)
}

// Capsule is the agent's latest capsule, or NO_CAPSULE.
func (a *Agent) Capsule() (*capsule.CapsuleRecord, error) {
	rec := a.store.Capsule()
	if rec == nil {
		return nil, capsule.Refuse(capsule.CodeNoCapsule, "",
			"agent %s has no capsule yet; PUT /v1/capsule stores one, POST /v1/capsule/seal builds one", a.name)
	}
	return rec, nil
}

// PutCapsule stores a capsule: the published schema, then the secret
// guard, then disk.
func (a *Agent) PutCapsule(ctx context.Context, g *guard.Guard, body []byte) (*CapsuleAnswer, error) {
	if err := a.handedOver(); err != nil {
		return nil, err
	}
	c, err := g.DecodeCapsule(body)
	if err != nil {
		return nil, err
	}
	seq, err := a.store.PutCapsule(ctx, c, false, capsule.OriginExplicit)
	if err != nil {
		return nil, err
	}
	return &CapsuleAnswer{Seq: seq, Capsule: a.store.Capsule()}, nil
}

// Seal builds a capsule from the current state and receipts (optionally
// overridden by body), checks it like any capsule, and stores it sealed.
func (a *Agent) Seal(ctx context.Context, g *guard.Guard, body []byte) (*CapsuleAnswer, error) {
	if err := a.handedOver(); err != nil {
		return nil, err
	}
	ov, err := guard.DecodeSealRequest(body)
	if err != nil {
		return nil, err
	}
	c := capsule.Seal(a.store.Resume(), a.store.Capsule(), time.Now().UTC())
	ov.Apply(c)
	if err := g.CheckCapsule(c); err != nil {
		return nil, err
	}
	seq, err := a.store.PutCapsule(ctx, c, true, capsule.OriginExplicit)
	if err != nil {
		return nil, err
	}
	return &CapsuleAnswer{Seq: seq, Capsule: a.store.Capsule()}, nil
}

// Signal stores a context signal (hooks, the statusline, MCP, the API).
func (a *Agent) Signal(ctx context.Context, g *guard.Guard, body []byte) (*SignalAnswer, error) {
	if err := a.handedOver(); err != nil {
		return nil, err
	}
	sig, err := g.DecodeSignal(body)
	if err != nil {
		return nil, err
	}
	if sig.Tool != nil {
		sig.Tool.At = toolTime(sig.Tool.At, receiptOf(ctx))
	}
	if sig.TranscriptPath != "" && sig.Via != "transcript" {
		// A transcript is one agent's: one the caller may not name is left
		// out, and the rest of the signal stored.
		if err := a.capture.TranscriptNamed(sig.TranscriptPath, callerOf(ctx)); err != nil {
			level := slog.LevelWarn
			if errors.Is(err, capture.ErrTranscriptMissing) {
				level = slog.LevelDebug
			}
			a.log.Log(ctx, level, "a transcript named by a hook was refused: this agent does not follow it, and whoever holds it keeps it",
				"transcript", sig.TranscriptPath, "uid", callerOf(ctx), "why", err)
			sig.TranscriptPath = ""
		}
	}
	seq, err := a.store.Signal(ctx, sig)
	if err != nil {
		return nil, err
	}
	return &SignalAnswer{Seq: seq, Context: a.store.Resume().Context}, nil
}

// DeadLetters are the writes upstream refused for good ("" : every
// upstream's).
func (a *Agent) DeadLetters(upstream string) ([]residency.DeadLetter, error) {
	if upstream != "" && a.Shipper(upstream) == nil {
		return nil, capsule.Refuse(capsule.CodeNotFound, "upstream",
			"agent %s does not ship to an upstream called %q", a.name, upstream)
	}
	dl, err := a.store.DeadLetters(upstream)
	if err != nil {
		return nil, err
	}
	if dl == nil {
		dl = []residency.DeadLetter{}
	}
	return dl, nil
}

// DeadLetterAction retries (or discards) one dead letter, or all of an
// upstream's, as body names them; it returns how many.
func (a *Agent) DeadLetterAction(ctx context.Context, body []byte, retry bool) (*guard.DeadLetterRequest, int, error) {
	req, err := guard.DecodeDeadLetterRequest(body)
	if err != nil {
		return nil, 0, err
	}
	sh := a.Shipper(req.Upstream)
	if sh == nil {
		// The name is not repeated: a value pasted by mistake may be a secret.
		var names []string
		for _, s := range a.shippers {
			names = append(names, s.Name())
		}
		return nil, 0, capsule.Refuse(capsule.CodeInvalidField, "upstream",
			"agent %s does not ship to an upstream of that name; it ships to %v", a.name, names)
	}
	var n int
	if retry {
		n, err = a.store.RetryDead(ctx, req.Upstream, req.Seq)
		sh.Kick()
	} else {
		n, err = a.store.DiscardDead(ctx, req.Upstream, req.Seq)
	}
	return req, n, err
}
