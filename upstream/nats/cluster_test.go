package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

// TestClusterConservation drives 2,000 writes of four agents through a
// shared rate limiter into a three-node cluster with replicas 3, the way
// the outbox does (one write at a time per agent, each call after a token,
// retrying on the classified errors), while the stream's leader is stopped
// and restarted. The stream must then hold every acknowledged write, once
// per Idempotency-Key, in order per agent; the server must have seen no
// more publishes than calls the limiter allowed. Then two writers of one
// agent must both report the conflict.
func TestClusterConservation(t *testing.T) {
	const agents = 4
	total := 2000
	if testing.Short() {
		total = 400
	}
	perAgent := total / agents
	const (
		ratePerSec = 500.0
		burst      = 20
	)
	cl := startCluster(t, 3)
	c := newTestClient(t, cl.urls(), func(o *Options) { o.Replicas = 3; o.Timeout = 2 * time.Second })
	ctx := ctxT(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// A monitor counts the publishes the servers see (it may miss a few
	// while it reconnects; it must never count more than the calls).
	mon, _ := rawJS(t, cl.urls()...)
	var seen atomic.Int64
	sub, err := mon.Subscribe("continuityd.writes.>", func(*natsgo.Msg) { seen.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}

	lim := rate.NewLimiter(ratePerSec, burst)
	var (
		mu      sync.Mutex
		allowed []time.Time // when the limiter let each call go
		acked   atomic.Int64
		retries atomic.Int64
	)
	// call takes a token as rate.Limiter.Wait does, noting when it was due.
	call := func() error {
		// Under mu, so the limiter sees the callers' clocks in order (a
		// reservation made with an earlier now after a later one would
		// be measured against the wrong instant).
		mu.Lock()
		now := time.Now()
		r := lim.ReserveN(now, 1)
		d := r.DelayFrom(now)
		allowed = append(allowed, now.Add(d))
		mu.Unlock()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for a := range agents {
		agent := fmt.Sprintf("agent-%d", a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); seq <= uint64(perAgent); seq++ {
				w := focusWrite("res"+strconv.Itoa(a), seq, fmt.Sprintf("%s focus %d", agent, seq))
				for attempt := 0; ; attempt++ {
					if err := call(); err != nil {
						errs <- fmt.Errorf("%s seq %d: %w", agent, seq, err)
						return
					}
					err := c.Deliver(ctx, agent, w)
					if err == nil {
						acked.Add(1)
						break
					}
					switch upstream.Classify(err) {
					case upstream.Retry:
					case upstream.RateLimited:
						var ue *upstream.Error
						errors.As(err, &ue)
						time.Sleep(ue.RetryAfter)
					default:
						errs <- fmt.Errorf("%s seq %d: refused for good: %w", agent, seq, err)
						return
					}
					retries.Add(1)
					back := min(20*time.Millisecond<<min(attempt, 5), 500*time.Millisecond)
					time.Sleep(rand.N(back) + time.Millisecond)
				}
			}
		}()
	}

	// Stop the stream's leader a third of the way, and bring it back two
	// thirds of the way.
	waitAcked := func(n int64) {
		for acked.Load() < n && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAcked(int64(total / 3))
	victim := 1
	if st, err := c.js.Stream(ctx, DefaultStream); err == nil {
		if info, err := st.Info(ctx); err == nil && info.Cluster != nil {
			fmt.Sscanf(info.Cluster.Leader, "n%d", &victim)
			victim--
		}
	}
	t.Logf("stopping node %d (the stream's leader; the client is on %s) at %d acknowledged writes",
		victim+1, c.nc.ConnectedServerName(), acked.Load())
	cl.stop(victim)
	waitAcked(int64(2 * total / 3))
	cl.restart(victim)
	t.Logf("restarted node %d at %d acknowledged writes", victim+1, acked.Load())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged after %d retries", acked.Load(), retries.Load())

	// Every acknowledged write, once per key, in order per agent.
	_, js := rawJS(t, cl.urls()...)
	for a := range agents {
		agent := fmt.Sprintf("agent-%d", a)
		msgs := streamMsgs(t, js, DefaultStream, "continuityd.writes."+agent+".*")
		if len(msgs) != perAgent {
			t.Errorf("%s: stream holds %d writes, want %d", agent, len(msgs), perAgent)
		}
		keys := map[string]bool{}
		for i, m := range msgs {
			id := m.Headers().Get(natsgo.MsgIdHdr)
			if keys[id] {
				t.Errorf("%s: key %s twice", agent, id)
			}
			keys[id] = true
			if want := strconv.Itoa(i + 1); m.Headers().Get(HeaderSeq) != want {
				t.Fatalf("%s: message %d has seq %s, want %s (out of order)", agent, i, m.Headers().Get(HeaderSeq), want)
			}
		}
	}

	// Never faster than the rate: every call was allowed by the limiter
	// (no more than burst + rate×t in any span), and the servers saw no
	// more publishes than calls (no retry or buffered resend behind the
	// limiter's back).
	mu.Lock()
	ts := slices.Clone(allowed)
	mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	for i := range ts {
		for j := i + burst; j < len(ts); j++ {
			if n := float64(j - i + 1); n > burst+ratePerSec*ts[j].Sub(ts[i]).Seconds()+1e-6 {
				t.Fatalf("%v calls in %v: over %v/s with burst %d", n, ts[j].Sub(ts[i]), ratePerSec, burst)
			}
			if ts[j].Sub(ts[i]) > time.Second {
				break
			}
		}
	}
	if got := seen.Load(); got > int64(len(ts)) {
		t.Fatalf("the servers saw %d publishes for %d calls", got, len(ts))
	}

	// Split writers on the cluster (a bucket with replicas 3 reports CAS
	// conflicts with another code).
	ra, rb := newRecorder(), newRecorder()
	a := newTestClient(t, cl.urls(), func(o *Options) { o.Machine = "host-a"; o.Replicas = 3; o.OnConflict = ra.on })
	b := newTestClient(t, cl.urls(), func(o *Options) { o.Machine = "host-b"; o.Replicas = 3; o.OnConflict = rb.on })
	revA, err := a.PutState(ctx, "split", resumeDoc(t, "split", 1, "a", "", 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutState(ctx, "split", resumeDoc(t, "split", 1, "b", "", 0), revA); err != nil {
		t.Fatal(err)
	}
	if ce := ra.wait(t, "a"); ce.Machine != "host-b" {
		t.Errorf("a: %+v", ce)
	}
	if ce := rb.wait(t, "b"); ce.Machine != "host-a" {
		t.Errorf("b: %+v", ce)
	}
	if _, err := a.PutState(ctx, "split", resumeDoc(t, "split", 2, "a", "", 0), revA); !errors.Is(err, capsule.ErrFleetConflict) {
		t.Fatalf("a's write over b's: %v", err)
	}
}
