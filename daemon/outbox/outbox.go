// Package outbox ships an agent's accepted writes to one upstream: it reads
// the residency log from the upstream's cursor, delivers each write in
// order, and acknowledges what was taken, so a write leaves the log only
// after every upstream has it. Failed deliveries are retried with
// exponential backoff and full jitter, forever.
package outbox

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/upstream"
)

// Backoff bounds for retries.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	readBatch         = 64
)

// Shipper delivers one agent's log to one upstream. Create with New; run
// with Run.
type Shipper struct {
	agent     string
	store     *residency.Store
	up        upstream.Upstream
	upstreams []string // all of the agent's upstreams, for log pruning
	log       *slog.Logger
	minBack   time.Duration
	maxBack   time.Duration

	wake chan struct{} // buffered 1: "the log has something new"

	mu        sync.Mutex
	state     capsule.UpstreamState
	delivered chan struct{} // closed and replaced after each acknowledgement
}

// Options configures a Shipper.
type Options struct {
	Agent      string
	Store      *residency.Store
	Upstream   upstream.Upstream
	Upstreams  []string
	Logger     *slog.Logger
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

// New returns a Shipper; nothing runs until Run.
func New(o Options) *Shipper {
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Shipper{
		agent: o.Agent, store: o.Store, up: o.Upstream, upstreams: o.Upstreams,
		log:     o.Logger.With("agent", o.Agent, "upstream", o.Upstream.Name()),
		minBack: o.MinBackoff, maxBack: o.MaxBackoff,
		wake:      make(chan struct{}, 1),
		delivered: make(chan struct{}),
		state: capsule.UpstreamState{
			Name: o.Upstream.Name(), Kind: o.Upstream.Kind(), State: capsule.UpstreamOK,
			Delivered: o.Store.Acknowledged(o.Upstream.Name()),
		},
	}
}

// Notify tells the shipper the log has grown. It never blocks.
func (s *Shipper) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends.
func (s *Shipper) Run(ctx context.Context) {
	attempt := 0
	for {
		ws, err := s.store.Pending(s.up.Name(), s.deliveredSeq(), readBatch)
		if err != nil {
			s.fail(err, 0)
			if !s.sleep(ctx, s.backoff(&attempt)) {
				return
			}
			continue
		}
		if len(ws) == 0 {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		var last uint64
		var failed error
		for _, w := range ws {
			if err := s.up.Deliver(ctx, s.agent, w); err != nil {
				failed = err
				break
			}
			last = w.Seq
		}
		if last > 0 {
			if f, ok := s.up.(upstream.Flusher); ok {
				if err := f.Flush(ctx, s.agent); err != nil {
					failed, last = err, 0
				}
			}
		}
		if last > 0 {
			attempt = 0
			s.store.Ack(s.up.Name(), last, s.upstreams)
			s.succeed(last)
		}
		if failed != nil {
			if ctx.Err() != nil {
				return
			}
			wait := s.backoff(&attempt)
			s.fail(failed, wait)
			if !s.sleep(ctx, wait) {
				return
			}
		}
	}
}

// backoff returns the next wait: full jitter over an exponential ceiling.
func (s *Shipper) backoff(attempt *int) time.Duration {
	ceil := s.minBack << min(*attempt, 20)
	if ceil > s.maxBack || ceil <= 0 {
		ceil = s.maxBack
	}
	*attempt++
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}

func (s *Shipper) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Shipper) succeed(seq uint64) {
	now := time.Now().UTC()
	s.mu.Lock()
	wasFailing := s.state.State != capsule.UpstreamOK
	s.state.State, s.state.LastError, s.state.NextAttempt = capsule.UpstreamOK, nil, nil
	s.state.LastSuccess, s.state.Delivered = &now, seq
	close(s.delivered)
	s.delivered = make(chan struct{})
	s.mu.Unlock()
	if wasFailing {
		s.log.Info("upstream delivering again", "delivered_seq", seq)
	}
}

func (s *Shipper) fail(err error, wait time.Duration) {
	msg := err.Error()
	next := time.Now().Add(wait).UTC()
	s.mu.Lock()
	changed := s.state.State != capsule.UpstreamRetrying || s.state.LastError == nil || *s.state.LastError != msg
	s.state.State, s.state.LastError, s.state.NextAttempt = capsule.UpstreamRetrying, &msg, &next
	s.mu.Unlock()
	if changed {
		s.log.Warn("delivery failed; retrying", "err", msg, "retry_in", wait.Round(time.Millisecond))
	}
}

func (s *Shipper) deliveredSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Delivered
}

// State returns the upstream's delivery state, with the pending count.
func (s *Shipper) State() capsule.UpstreamState {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if n, err := s.store.PendingCount(s.up.Name(), st.Delivered); err == nil {
		st.Pending = n
	}
	return st
}

// WaitDelivered waits until the upstream has acknowledged seq or ctx ends.
func (s *Shipper) WaitDelivered(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		done, ch := s.state.Delivered >= seq, s.delivered
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
