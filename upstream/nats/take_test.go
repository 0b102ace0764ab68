package nats

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

// handoverRecorder collects OnHandover calls.
type handoverRecorder struct {
	mu  sync.Mutex
	got []capsule.FleetHandover
	ch  chan struct{}
}

func newHandoverRecorder() *handoverRecorder { return &handoverRecorder{ch: make(chan struct{}, 16)} }

func (r *handoverRecorder) on(h capsule.FleetHandover) {
	r.mu.Lock()
	r.got = append(r.got, h)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *handoverRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// A writes the agent; B resumes it from the fleet and writes on. B's take
// is refused while A's state is within the conflict window (naming A,
// the window and --force), done with force; A, still running, learns it
// without writing, stops (its state and its writes are refused, the writes
// held in its outbox), and so does A restarted; the fleet lists the agent
// once, B its writer.
func TestTakeRefusedWhileRecentForcedAndTheOldWriterStops(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	ha, ca := newHandoverRecorder(), newRecorder()
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) {
		o.Machine = "host-a"
		o.ConflictWindow = time.Hour
		o.OnHandover = ha.on
		o.OnConflict = ca.on
	})
	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-b"; o.ConflictWindow = time.Hour })

	revA, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 3, "a's focus", "", 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deliver(ctx, "builder", focusWrite("ra", 3, "a's focus")); err != nil {
		t.Fatal(err)
	}
	r, err := b.Restore(ctx, "builder")
	if err != nil || r.Revision != revA {
		t.Fatal(r, err)
	}
	// A is live: its watcher may see B's write and keep its own state
	// apart before B's write returns, and B then says so; B's write is
	// the key's either way.
	var ce *capsule.FleetConflictError
	if _, err := b.PutState(ctx, "builder", resumeDoc(t, "builder", 3, "a's focus", "", 0), r.Revision); err != nil && (!errors.As(err, &ce) || !ce.Held) {
		t.Fatal(err)
	}

	_, err = b.Take(ctx, "builder", resumeDoc(t, "builder", 3, "b took it", "", 0), false)
	var te *capsule.FleetTakeError
	if !errors.As(err, &te) || !te.Recent || te.Writer != "host-a" {
		t.Fatalf("take within the window = %v, want refused naming host-a", err)
	}
	for _, want := range []string{"host-a", "conflict window (1h0m0s)", "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if h := b.Handover("builder"); h != nil {
		t.Fatalf("a refused take left a handover: %+v", h)
	}

	h, err := b.Take(ctx, "builder", resumeDoc(t, "builder", 3, "b took it", "", 0), true)
	if err != nil {
		t.Fatal(err)
	}
	if h.Here != capsule.HandoverTaken || h.From != "host-a" || h.To != "host-b" || !h.Forced || h.Revision <= revA || h.Seq != 3 {
		t.Fatalf("b's handover = %+v", h)
	}

	// A learns it from the bucket, without writing, once.
	select {
	case <-ha.ch:
	case <-time.After(60 * time.Second):
		t.Fatal("A was never told of the take")
	}
	ga := a.Handover("builder")
	if ga == nil || ga.Here != capsule.HandoverGiven || ga.To != "host-b" || ga.Revision != h.Revision {
		t.Fatalf("A's handover = %+v", ga)
	}
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 4, "a again", "", 0), revA); !errors.Is(err, capsule.ErrFleetHandedOver) {
		t.Fatalf("A's state after the take = %v, want handed over", err)
	}
	err = a.Deliver(ctx, "builder", focusWrite("ra", 4, "a again"))
	var ue *upstream.Error
	if !errors.As(err, &ue) || ue.Outcome != upstream.RateLimited || ue.Code != capsule.CodeAgentHandedOver {
		t.Fatalf("A's write after the take = %v, want held (AGENT_HANDED_OVER)", err)
	}
	if n := ha.count(); n != 1 {
		t.Errorf("A was told %d times", n)
	}
	if c := a.Conflicts(); len(c) != 0 {
		t.Errorf("a take reported as a conflict on A: %+v", c)
	}
	// Nothing of A's went in after the take: the key is B's, the stream
	// ends at A's last write, and A kept no state apart since (it did when
	// B first wrote over it, before the take).
	got, err := b.Restore(ctx, "builder")
	if err != nil || got.Machine != "host-b" || got.LastSeq != 3 {
		t.Fatalf("the fleet after A's tries: machine %s, last seq %d, %v", got.Machine, got.LastSeq, err)
	}
	for _, c := range got.Conflicts {
		if c.Revision > h.Revision {
			t.Errorf("A kept its state apart after the take: %+v", c)
		}
	}

	// A restarted (its revision forgotten) stops at its first write.
	a2 := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a"; o.ConflictWindow = time.Hour })
	if _, err := a2.PutState(ctx, "builder", resumeDoc(t, "builder", 4, "a again", "", 0), 0); !errors.Is(err, capsule.ErrFleetHandedOver) {
		t.Fatalf("A restarted: %v, want handed over", err)
	}
	// B restarted still writes it.
	b2 := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-b"; o.ConflictWindow = time.Hour })
	if _, err := b2.PutState(ctx, "builder", resumeDoc(t, "builder", 4, "b on", "", 0), 0); err != nil {
		t.Fatalf("B restarted: %v", err)
	}
	if hb := b2.Handover("builder"); hb == nil || hb.Here != capsule.HandoverTaken {
		t.Errorf("B restarted: handover %+v", hb)
	}

	agents, err := b.Agents(ctx)
	if err != nil || len(agents) != 1 || agents[0].Agent != "builder" || agents[0].Machine != "host-b" {
		t.Fatalf("fleet listing after a take: %+v %v", agents, err)
	}
}

// A third daemon that resumes the agent from the fleet after the take
// writes it: the handover concerns the writers before it.
func TestResumeAfterATakeIsNotHandedOver(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a"; o.ConflictWindow = time.Nanosecond })
	b := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-b"; o.ConflictWindow = time.Nanosecond })
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 1, "a", "", 0), 0); err != nil {
		t.Fatal(err)
	}
	// Past the window: no force needed, and the handover says so.
	h, err := b.Take(ctx, "builder", resumeDoc(t, "builder", 1, "b", "", 0), false)
	if err != nil || h.Forced || h.From != "host-a" {
		t.Fatalf("take after the window: %+v %v", h, err)
	}
	b.Close() // gone too: C resumes the agent alone
	c := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-c" })
	r, err := c.Restore(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutState(ctx, "builder", resumeDoc(t, "builder", 2, "c", "", 0), r.Revision); err != nil {
		t.Fatalf("C after a restore: %v", err)
	}
	if err := c.Deliver(ctx, "builder", focusWrite("rc", 2, "c")); err != nil {
		t.Fatalf("C's write: %v", err)
	}
	if hc := c.Handover("builder"); hc != nil {
		t.Errorf("C sees a handover of its own: %+v", hc)
	}
}

// Two daemons take the agent at once, both having read the same revision:
// one wins, the other is refused naming the winner and stops writing the
// agent, and the key holds the winner's state.
func TestTwoTakersOneWins(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "host-a" })
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 1, "a", "", 0), 0); err != nil {
		t.Fatal(err)
	}
	var read sync.WaitGroup
	read.Add(2)
	both := func(string, uint64) { read.Done(); read.Wait() } // neither writes before both have read
	takers := map[string]*Client{}
	for _, m := range []string{"host-b", "host-c"} {
		takers[m] = newTestClient(t, []string{serverURL(s)}, func(o *Options) {
			o.Machine = m
			o.ConflictWindow = time.Hour
			o.beforeTake = both
		})
	}
	type result struct {
		machine string
		h       *capsule.FleetHandover
		err     error
	}
	out := make(chan result, 2)
	for m, c := range takers {
		go func() {
			h, err := c.Take(ctx, "builder", resumeDoc(t, "builder", 1, m, "", 0), true)
			out <- result{m, h, err}
		}()
	}
	var won, lost []result
	for range 2 {
		r := <-out
		if r.err == nil {
			won = append(won, r)
		} else {
			lost = append(lost, r)
		}
	}
	if len(won) != 1 || len(lost) != 1 {
		t.Fatalf("won %+v, lost %+v: want one each", won, lost)
	}
	var te *capsule.FleetTakeError
	if !errors.As(lost[0].err, &te) || !te.Lost || te.Writer != won[0].machine || !strings.Contains(lost[0].err.Error(), "another take won") {
		t.Fatalf("the loser's error = %v, want a lost race naming %s", lost[0].err, won[0].machine)
	}
	// The loser, a writer older than the take, stops writing the agent.
	loser := takers[lost[0].machine]
	if _, err := loser.PutState(ctx, "builder", resumeDoc(t, "builder", 2, "loser", "", 0), 1); !errors.Is(err, capsule.ErrFleetHandedOver) {
		t.Fatalf("the loser's state after the race = %v, want handed over", err)
	}
	if h := loser.Handover("builder"); h == nil || h.Here != capsule.HandoverGiven || h.To != won[0].machine {
		t.Errorf("the loser's handover = %+v", h)
	}
	r, err := a.Restore(context.Background(), "builder")
	if err != nil || r.Machine != won[0].machine || r.Revision != won[0].h.Revision {
		t.Fatalf("the key after the race: %+v %v (winner %+v)", r, err, won[0].h)
	}
}

// Nothing to take: no state in the fleet, or this daemon its only writer.
func TestTakeWithNothingToTake(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	ctx := ctxT(t)
	a := newTestClient(t, []string{serverURL(s)}, nil)
	var te *capsule.FleetTakeError
	if _, err := a.Take(ctx, "builder", resumeDoc(t, "builder", 1, "a", "", 0), true); !errors.As(err, &te) || !strings.Contains(err.Error(), "nothing to take") {
		t.Fatalf("take of an agent the fleet lacks: %v", err)
	}
	if _, err := a.PutState(ctx, "builder", resumeDoc(t, "builder", 1, "a", "", 0), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Take(ctx, "builder", resumeDoc(t, "builder", 1, "a", "", 0), true); !errors.As(err, &te) || !strings.Contains(err.Error(), "no other writer") {
		t.Fatalf("take of an agent this daemon alone writes: %v", err)
	}
}
