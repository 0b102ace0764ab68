// Package outbox ships an agent's accepted writes to one upstream: it reads
// the residency log from the upstream's cursor, coalesces what can be merged
// without losing meaning, waits for the upstream's rate limit, delivers in
// order under each write's Idempotency-Key, and acknowledges what was
// taken, so a write leaves the log only after every upstream has it.
//
// Failures are classified (see upstream.Outcome): transient ones are retried
// forever with exponential backoff and full jitter; 429s wait out their
// Retry-After; 401/403 retry slowly, and at once on Kick (a reload); a 409
// RESIDENCY_STOPPED pauses until the agent writes resume_residency; any
// other refusal moves the write to the upstream's dead letter, where it is
// shown until an operator retries or discards it.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/upstream"
)

// Defaults for Options.
const (
	DefaultMinBackoff        = time.Second
	DefaultMaxBackoff        = 5 * time.Minute
	DefaultMaxRetryAfter     = 10 * time.Minute
	DefaultUnauthorizedRetry = 5 * time.Minute
	readBatch                = 64
)

// Options configures a Shipper.
type Options struct {
	Agent    string
	Store    *residency.Store
	Upstream upstream.Upstream
	// Upstreams are all of the agent's upstream names (log pruning).
	Upstreams []string
	// Limiter is the upstream's rate limit, shared by every agent that uses
	// the upstream. nil: unlimited.
	Limiter *rate.Limiter
	// Coalesce merges runs of state-only checkpoints into one call.
	Coalesce bool
	Logger   *slog.Logger
	// MinBackoff and MaxBackoff bound the exponential backoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps how long a 429's Retry-After is honoured.
	MaxRetryAfter time.Duration
	// UnauthorizedRetry is how long to wait after a 401/403 (Kick cuts it).
	UnauthorizedRetry time.Duration
	// OnFailure is told about a write refused for good. It must not block.
	OnFailure func(w capsule.Write, reason string)
	// OnAttempt is told about every delivery attempt (metrics). Optional.
	OnAttempt func(outcome string, d time.Duration)
	// OnDelivered is told after a write was delivered and the state
	// resume shows for the upstream moved. It must not block. Optional.
	OnDelivered func()
	// Linger paces short batches: one leaves at once when the last left
	// Linger or more ago, else its writes gather until then (the local
	// archive: one flush for the many writes of a flood, and a lone write
	// stored in the wake-up that logged it, not in one of its own). 0:
	// none.
	Linger time.Duration
}

// Shipper delivers one agent's log to one upstream. Create with New; run
// with Run.
type Shipper struct {
	o   Options
	log *slog.Logger

	wake chan struct{} // buffered 1: the log has something new
	kick chan struct{} // buffered 1: retry now (reload, operator)

	// inflight is the unit being delivered, kept across retries so a retry
	// sends the same composition under the same Idempotency-Key.
	inflight *unit
	// stoppedUpstream is set by a 409 RESIDENCY_STOPPED: nothing is sent
	// until the log holds a write with resume_residency.
	stoppedUpstream bool
	// queue is the part of the log read but not yet sent, so the log is
	// read once per batch, not once per write.
	queue []capsule.Write
	// lastShort is when the last short batch was read to be sent: the
	// next waits until Linger after it.
	lastShort time.Time
	// prepaid is how many of the queue's writes the rate limit has
	// already let through: an upstream that flushes takes a batch's tokens
	// at once (its writes reach the disk in one append), not one wait per
	// write.
	prepaid int
	// checkRetries is set when dead letters may have been marked for retry
	// (at start, and on Kick).
	checkRetries atomic.Bool

	mu      sync.Mutex
	state   capsule.UpstreamState
	failing string // "" or the failure state: retrying, paused, unauthorized
	// rejection is why the latest write went to the dead letter: what
	// last_error shows while the dead letter holds something and nothing
	// else is failing ("" until known; read from the store after a start).
	rejection string
	delivered chan struct{}
}

// unit is what one upstream call carries: one write, or a merged run.
type unit struct {
	write capsule.Write   // what is sent (Seq is the run's last)
	first uint64          // first seq covered
	ws    []capsule.Write // the log entries covered
}

// New returns a Shipper; nothing runs until Run.
func New(o Options) *Shipper {
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.UnauthorizedRetry <= 0 {
		o.UnauthorizedRetry = DefaultUnauthorizedRetry
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Limiter == nil {
		o.Limiter = rate.NewLimiter(rate.Inf, 1)
	}
	name := o.Upstream.Name()
	sh := &Shipper{
		o:         o,
		log:       o.Logger.With("agent", o.Agent, "upstream", name),
		wake:      make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		delivered: make(chan struct{}),
		state: capsule.UpstreamState{
			Name: name, Kind: o.Upstream.Kind(), State: capsule.UpstreamOK,
			Delivered: o.Store.Acknowledged(name),
		},
	}
	sh.checkRetries.Store(true) // an operator may have marked some before a restart
	return sh
}

// Name is the upstream's name.
func (s *Shipper) Name() string { return s.o.Upstream.Name() }

// Notify tells the shipper the log has grown. It never blocks.
func (s *Shipper) Notify() { signal(s.wake) }

// Kick cuts any wait short: the token or config was reloaded, or an
// operator asked for a retry. It never blocks.
func (s *Shipper) Kick() {
	s.checkRetries.Store(true)
	signal(s.kick)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends.
func (s *Shipper) Run(ctx context.Context) {
	if r, ok := s.o.Upstream.(upstream.Recoverer); ok {
		// A failure here is not fatal: the file is repaired again when a
		// write is next appended to it, and that failure is the upstream's.
		if err := r.Recover(s.o.Agent); err != nil {
			s.log.Error("outbox: could not repair what an interrupted run left; retried at the next delivery", "err", err)
		}
	}
	attempt := 0
	for ctx.Err() == nil {
		wait, err := s.step(ctx, &attempt)
		if err != nil && ctx.Err() == nil {
			s.log.Error("outbox step failed", "err", err)
			wait = s.backoff(&attempt)
		}
		if wait < 0 { // idle: nothing to send
			select {
			case <-s.wake:
			case <-s.kick:
			case <-ctx.Done():
			}
			continue
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.kick:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// step does one delivery attempt. It returns how long to wait before the
// next (negative: until woken).
func (s *Shipper) step(ctx context.Context, attempt *int) (time.Duration, error) {
	name := s.o.Upstream.Name()
	if s.checkRetries.Load() {
		retries, err := s.o.Store.Retries(name)
		if err != nil {
			return 0, err
		}
		if len(retries) > 0 {
			return s.retryDead(ctx, retries[0], attempt)
		}
		s.checkRetries.Store(false)
	}
	if s.inflight == nil {
		if len(s.queue) == 0 {
			ws, err := s.o.Store.Pending(name, s.deliveredSeq(), readBatch)
			if err != nil {
				return 0, err
			}
			s.queue = ws
			if s.o.Linger > 0 && len(ws) > 0 && len(ws) < readBatch {
				if wait := time.Until(s.lastShort.Add(s.o.Linger)); wait > 0 {
					s.queue = nil
					return wait, nil
				}
				s.lastShort = time.Now()
			}
			if err := s.prepay(ctx, len(ws)); err != nil {
				s.queue = nil
				return 0, err
			}
		}
		if len(s.queue) == 0 {
			return -1, nil
		}
		if s.stoppedUpstream {
			ws := s.queue
			s.queue = nil
			return s.waitForResume(ctx, ws)
		}
		s.inflight = s.compose(s.queue)
		s.queue = s.queue[len(s.inflight.ws):]
	}
	u := s.inflight
	// A kind the upstream does not take counts as delivered: it goes through
	// the same path, so it never acknowledges a batch not yet flushed.
	var err error
	if s.o.Upstream.Accepts(u.write.Kind) {
		err = s.deliver(ctx, u.write)
	}
	if err == nil {
		*attempt = 0
		f, flushes := s.o.Upstream.(upstream.Flusher)
		if flushes && len(s.queue) > 0 {
			// Made durable, and acknowledged, at the end of the batch.
			s.inflight = nil
			return 0, nil
		}
		if flushes {
			err = f.Flush(ctx, s.o.Agent)
		}
		if err == nil {
			s.taken(u)
			return 0, nil
		}
		// The batch did not reach the disk: send it again.
		s.inflight, s.queue = nil, nil
	}
	if ctx.Err() != nil {
		return 0, nil
	}
	return s.failed(ctx, u, err, attempt)
}

// prepay takes the rate limit's tokens for a batch of n writes read from
// the log at once, when the upstream flushes batches (at most its burst;
// the rest wait one by one). The limit counts the same writes a second.
func (s *Shipper) prepay(ctx context.Context, n int) error {
	s.prepaid = 0
	if _, flushes := s.o.Upstream.(upstream.Flusher); !flushes || n == 0 {
		return nil
	}
	n = min(n, s.o.Limiter.Burst())
	if err := s.o.Limiter.WaitN(ctx, n); err != nil {
		return err
	}
	s.prepaid = n
	return nil
}

// deliver makes one call through the rate limiter.
func (s *Shipper) deliver(ctx context.Context, w capsule.Write) error {
	if s.prepaid > 0 {
		s.prepaid--
	} else if err := s.o.Limiter.Wait(ctx); err != nil {
		return err
	}
	start := time.Now()
	err := s.o.Upstream.Deliver(ctx, s.o.Agent, w)
	if s.o.OnAttempt != nil {
		s.o.OnAttempt(outcomeName(err), time.Since(start))
	}
	return err
}

func outcomeName(err error) string {
	if err == nil {
		return "ok"
	}
	switch upstream.Classify(err) {
	case upstream.RateLimited:
		return "rate_limited"
	case upstream.Unauthorized:
		return "unauthorized"
	case upstream.Stopped:
		return "stopped"
	case upstream.Rejected:
		return "rejected"
	default:
		return "retry"
	}
}

// failed classifies a failed attempt, updates the state and says how long
// to wait.
func (s *Shipper) failed(ctx context.Context, u *unit, err error, attempt *int) (time.Duration, error) {
	var ue *upstream.Error
	errors.As(err, &ue)
	switch upstream.Classify(err) {
	case upstream.Rejected:
		reason := upstream.Describe(s.o.Upstream.Name(), err)
		if rerr := s.o.Store.Reject(ctx, s.o.Upstream.Name(), u.ws, reason, s.o.Upstreams); rerr != nil {
			return 0, rerr
		}
		s.inflight = nil
		s.setDelivered(u.write.Seq)
		s.setFailing("", nil, 0)
		s.setRejection(reason)
		s.log.Warn("upstream refused a write for good; kept in its dead letter", "seq", u.write.Seq, "err", reason)
		if s.o.OnFailure != nil {
			for _, w := range u.ws {
				s.o.OnFailure(w, reason)
			}
		}
		return 0, nil
	case upstream.Stopped:
		// Nothing more is accepted upstream until resume_residency: the
		// writes before it are refused for good there (kept in the dead
		// letter); the resume write and what follows are sent.
		s.inflight, s.queue = nil, nil // re-read from the refused write on
		s.stoppedUpstream = true
		s.setFailing(capsule.UpstreamPaused, err, 0)
		return 0, nil
	case upstream.RateLimited:
		// Without a Retry-After, a rate-limited upstream is never retried
		// sooner than the backoff floor (full jitter alone may draw ~0).
		wait := max(s.backoff(attempt), s.o.MinBackoff)
		if ue != nil && ue.RetryAfter > 0 {
			wait = min(ue.RetryAfter, s.o.MaxRetryAfter)
		}
		s.setFailing(capsule.UpstreamPaused, err, wait)
		return wait, nil
	case upstream.Unauthorized:
		s.setFailing(capsule.UpstreamUnauthorized, err, s.o.UnauthorizedRetry)
		return s.o.UnauthorizedRetry, nil
	default:
		wait := s.backoff(attempt)
		s.setFailing(capsule.UpstreamRetrying, err, wait)
		return wait, nil
	}
}

// waitForResume handles the stopped state: find the first write carrying
// resume_residency; what comes before it goes to the dead letter.
func (s *Shipper) waitForResume(ctx context.Context, ws []capsule.Write) (time.Duration, error) {
	for i, w := range ws {
		if w.Kind == capsule.WriteCheckpoint && w.Checkpoint != nil && w.Checkpoint.ResumeResidency {
			if i > 0 {
				reason := "RESIDENCY_STOPPED: refused while the residency was stopped upstream"
				if err := s.o.Store.Reject(ctx, s.o.Upstream.Name(), ws[:i], reason, s.o.Upstreams); err != nil {
					return 0, err
				}
				s.setDelivered(ws[i-1].Seq)
			}
			s.stoppedUpstream = false
			s.log.Info("resume_residency queued; delivering again")
			return 0, nil
		}
	}
	if len(ws) == readBatch {
		// Look further without holding the whole backlog in memory.
		reason := "RESIDENCY_STOPPED: refused while the residency was stopped upstream"
		if err := s.o.Store.Reject(ctx, s.o.Upstream.Name(), ws, reason, s.o.Upstreams); err != nil {
			return 0, err
		}
		s.setDelivered(ws[len(ws)-1].Seq)
		return 0, nil
	}
	return -1, nil
}

// retryDead sends one dead letter an operator asked to retry.
func (s *Shipper) retryDead(ctx context.Context, d residency.DeadLetter, attempt *int) (time.Duration, error) {
	err := s.deliver(ctx, d.Write)
	if err == nil {
		*attempt = 0
		return 0, s.o.Store.RetryDone(ctx, s.o.Upstream.Name(), d.Write.Seq, "")
	}
	if ctx.Err() != nil {
		return 0, nil
	}
	switch upstream.Classify(err) {
	case upstream.Rejected, upstream.Stopped:
		reason := upstream.Describe(s.o.Upstream.Name(), err)
		s.setRejection(reason)
		return 0, s.o.Store.RetryDone(ctx, s.o.Upstream.Name(), d.Write.Seq, reason)
	default:
		return s.failed(ctx, &unit{write: d.Write}, err, attempt)
	}
}

// compose picks the next unit: one write, or a run of state-only
// checkpoints merged (focus, working_state and public_status: the latest
// wins) when the upstream coalesces.
func (s *Shipper) compose(ws []capsule.Write) *unit {
	u := &unit{write: ws[0], first: ws[0].Seq, ws: ws[:1]}
	if !s.o.Coalesce || !coalescable(ws[0]) {
		return u
	}
	n := 1
	for n < len(ws) && coalescable(ws[n]) {
		n++
	}
	if n == 1 {
		return u
	}
	merged := *ws[0].Checkpoint
	for _, w := range ws[1:n] {
		mergeInto(&merged, w.Checkpoint)
	}
	last := ws[n-1]
	last.Checkpoint = &merged
	last.CoveredFrom = ws[0].Seq
	return &unit{write: last, first: ws[0].Seq, ws: ws[:n]}
}

// coalescable: a checkpoint that only sets state. A decide, a commitment
// operation, a stop or a resume_residency keeps its own call.
func coalescable(w capsule.Write) bool {
	cp := w.Checkpoint
	return w.Kind == capsule.WriteCheckpoint && cp != nil && cp.Decide == nil &&
		(cp.Commitments == nil || cp.Commitments.IsEmpty()) && cp.Stop == nil && !cp.ResumeResidency
}

func mergeInto(dst, src *capsule.Checkpoint) {
	if src.Focus != nil {
		dst.Focus = src.Focus
	}
	if src.PublicStatus != nil {
		dst.PublicStatus = src.PublicStatus
	}
	if ws := src.WorkingState; ws != nil {
		m := capsule.WorkingState{}
		if dst.WorkingState != nil {
			m = *dst.WorkingState
		}
		if ws.NextAction != nil {
			m.NextAction = ws.NextAction
		}
		if ws.LastResult != nil {
			m.LastResult = ws.LastResult
		}
		if ws.ResultRef.Set {
			m.ResultRef = ws.ResultRef
		}
		if ws.WaitingFor.Set {
			m.WaitingFor = ws.WaitingFor
		}
		dst.WorkingState = &m
	}
}

// taken acknowledges a delivered (or not applicable) unit.
func (s *Shipper) taken(u *unit) {
	s.inflight = nil
	s.o.Store.Ack(s.o.Upstream.Name(), u.write.Seq, s.o.Upstreams)
	now := time.Now().UTC()
	s.mu.Lock()
	s.state.LastSuccess = &now
	s.mu.Unlock()
	s.setDelivered(u.write.Seq)
	s.setFailing("", nil, 0)
	if s.o.OnDelivered != nil {
		s.o.OnDelivered()
	}
}

// backoff returns the next wait: full jitter over an exponential ceiling.
func (s *Shipper) backoff(attempt *int) time.Duration {
	ceil := s.o.MinBackoff << min(*attempt, 20)
	if ceil > s.o.MaxBackoff || ceil <= 0 {
		ceil = s.o.MaxBackoff
	}
	*attempt++
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}

func (s *Shipper) deliveredSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Delivered
}

func (s *Shipper) setDelivered(seq uint64) {
	s.mu.Lock()
	if seq > s.state.Delivered {
		s.state.Delivered = seq
	}
	close(s.delivered)
	s.delivered = make(chan struct{})
	s.mu.Unlock()
}

// setFailing records the failure state ("" when delivering fine) and logs
// state changes once, not every attempt.
func (s *Shipper) setFailing(state string, err error, wait time.Duration) {
	s.mu.Lock()
	prev := s.failing
	s.failing = state
	if state == "" {
		s.state.LastError, s.state.NextAttempt = nil, nil
	} else {
		msg := upstream.Describe(s.o.Upstream.Name(), err)
		next := time.Now().Add(wait).UTC()
		s.state.LastError, s.state.NextAttempt = &msg, &next
	}
	s.mu.Unlock()
	switch {
	case state != "" && state != prev:
		s.log.Warn("upstream "+state, "err", err, "retry_in", wait.Round(time.Millisecond))
	case state == "" && prev != "":
		s.log.Info("upstream delivering again")
	}
}

// State returns the upstream's delivery state as resume and status show it.
func (s *Shipper) State() capsule.UpstreamState {
	s.mu.Lock()
	st, failing := s.state, s.failing
	s.mu.Unlock()
	name := s.o.Upstream.Name()
	if n, err := s.o.Store.PendingCount(name, st.Delivered); err == nil {
		st.Pending = n
	}
	st.DeadLetter = s.o.Store.DeadCount(name)
	if failing == "" && st.DeadLetter > 0 && st.LastError == nil {
		// A rejected upstream says why: the latest refusal, as the
		// upstream worded it (code and message, never a secret).
		if why := s.lastRejection(); why != "" {
			st.LastError = &why
		}
	}
	switch {
	case failing != "":
		st.State = failing
	case st.DeadLetter > 0:
		st.State = capsule.UpstreamRejected
	default:
		st.State = capsule.UpstreamOK
	}
	return st
}

func (s *Shipper) setRejection(reason string) {
	s.mu.Lock()
	s.rejection = reason
	s.mu.Unlock()
}

// lastRejection is the latest dead letter's reason: known since a
// refusal, else read once from the store (after a restart).
func (s *Shipper) lastRejection() string {
	s.mu.Lock()
	why := s.rejection
	s.mu.Unlock()
	if why != "" {
		return why
	}
	dead, err := s.o.Store.DeadLetters(s.o.Upstream.Name())
	if err != nil {
		return ""
	}
	var latest residency.DeadLetter
	for _, d := range dead {
		if !d.At.Before(latest.At) {
			latest = d
		}
	}
	s.mu.Lock()
	if s.rejection == "" {
		s.rejection = latest.Error
	}
	why = s.rejection
	s.mu.Unlock()
	return why
}

// RefusedError is WaitDelivered's answer for a write the upstream refused
// for good: it went past it into the dead letter, it was not delivered.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "refused by the upstream: " + e.Reason }

// refusal is a *RefusedError if seq is in the upstream's dead letter.
func (s *Shipper) refusal(seq uint64) error {
	if s.o.Store.DeadCount(s.o.Upstream.Name()) == 0 {
		return nil
	}
	dead, err := s.o.Store.DeadLetters(s.o.Upstream.Name())
	if err != nil {
		return err
	}
	for _, d := range dead {
		if d.Write.Seq == seq {
			return &RefusedError{Reason: d.Error}
		}
	}
	return nil
}

// WaitDelivered waits until the upstream has taken (or refused for good)
// every write up to seq, or ctx ends. Write seq refused for good is a
// *RefusedError.
func (s *Shipper) WaitDelivered(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		done, ch := s.state.Delivered >= seq, s.delivered
		s.mu.Unlock()
		if done {
			return s.refusal(seq)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("not delivered yet: %w", ctx.Err())
		}
	}
}
