package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scripted is an upstream whose answers a test scripts, one per call; it
// records what it was sent. (The HTTP fakes in upstream/qdaytest and
// upstream/delxtest test the real clients; this tests the outbox's logic.)
type scripted struct {
	mu      sync.Mutex
	answers []error
	got     []capsule.Write
	calls   []time.Time
	kinds   map[capsule.WriteKind]bool
}

func (s *scripted) Name() string { return "up" }
func (s *scripted) Kind() string { return "test" }
func (s *scripted) Accepts(k capsule.WriteKind) bool {
	return s.kinds == nil || s.kinds[k]
}
func (s *scripted) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	if len(s.answers) > 0 {
		err := s.answers[0]
		s.answers = s.answers[1:]
		if err != nil {
			return err
		}
	}
	s.got = append(s.got, w)
	return nil
}

func (s *scripted) delivered() []capsule.Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]capsule.Write(nil), s.got...)
}

type rig struct {
	t      *testing.T
	store  *residency.Store
	up     *scripted
	sh     *Shipper
	cancel context.CancelFunc
	done   chan struct{}
}

func newRig(t *testing.T, up *scripted, o Options) *rig {
	t.Helper()
	return newRigFor(t, up, up, o)
}

// newRigFor is newRig for an upstream that wraps a scripted one (sc).
func newRigFor(t *testing.T, up upstream.Upstream, sc *scripted, o Options) *rig {
	t.Helper()
	r := &rig{t: t, up: sc, done: make(chan struct{})}
	var err error
	var sh *Shipper
	r.store, err = residency.Open(residency.Options{Agent: "a", Dir: t.TempDir(), Upstreams: []string{"up"},
		OnCommit: func(evs []residency.Event) {
			if sh != nil {
				sh.Notify()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	o.Agent, o.Store, o.Upstream, o.Upstreams = "a", r.store, up, []string{"up"}
	if o.MinBackoff == 0 {
		o.MinBackoff, o.MaxBackoff = time.Millisecond, 20*time.Millisecond
	}
	sh = New(o)
	r.sh = sh
	return r
}

func (r *rig) run() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.sh.Run(ctx); close(r.done) }()
	r.t.Cleanup(r.stop)
}

func (r *rig) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
	r.store.Close()
}

func (r *rig) write(cp *capsule.Checkpoint) uint64 {
	r.t.Helper()
	seq, err := r.store.Checkpoint(context.Background(), cp, capsule.OriginExplicit)
	if err != nil {
		r.t.Fatal(err)
	}
	return seq
}

func (r *rig) waitDelivered(seq uint64) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.sh.WaitDelivered(ctx, seq); err != nil {
		r.t.Fatalf("seq %d: %v (state %+v)", seq, err, r.sh.State())
	}
}

func focus(s string) *capsule.Checkpoint { return &capsule.Checkpoint{Focus: &s} }

func decide(s string) *capsule.Checkpoint {
	return &capsule.Checkpoint{Decide: &capsule.Decision{Chosen: s, Because: "a reason of at least twenty-four characters"}}
}

func TestCoalescesStateOnlyRunsKeepsDecisions(t *testing.T) {
	up := &scripted{}
	r := newRig(t, up, Options{Coalesce: true})
	// Queue before the shipper runs, so the whole backlog is there at once.
	r.write(focus("f1"))
	r.write(focus("f2"))
	r.write(&capsule.Checkpoint{WorkingState: &capsule.WorkingState{NextAction: ptr("n3")}})
	r.write(decide("d4"))
	r.write(focus("f5"))
	last := r.write(focus("f6"))
	r.run()
	r.waitDelivered(last)
	got := up.delivered()
	if len(got) != 3 {
		t.Fatalf("%d calls, want 3 (f1..n3 merged, d4, f5..f6 merged): %+v", len(got), got)
	}
	if *got[0].Checkpoint.Focus != "f2" || *got[0].Checkpoint.WorkingState.NextAction != "n3" || got[0].CoveredFrom != 1 || got[0].Seq != 3 {
		t.Fatalf("first merged call: %+v", got[0])
	}
	if got[1].Checkpoint.Decide == nil || got[1].Seq != 4 || got[1].CoveredFrom != 0 {
		t.Fatalf("decision call: %+v", got[1])
	}
	if *got[2].Checkpoint.Focus != "f6" {
		t.Fatalf("last: %+v", got[2])
	}
}

func TestRetriesTransientKeepingKeyAndOrder(t *testing.T) {
	up := &scripted{answers: []error{
		&upstream.Error{Outcome: upstream.Retry, Status: 503},
		&upstream.Error{Outcome: upstream.Retry, Status: 502},
	}}
	r := newRig(t, up, Options{})
	r.run()
	a := r.write(decide("a"))
	b := r.write(decide("b"))
	r.waitDelivered(b)
	got := up.delivered()
	if len(got) != 2 || got[0].Seq != a || got[1].Seq != b {
		t.Fatalf("order: %+v", got)
	}
	if n := len(up.calls); n != 4 {
		t.Fatalf("%d calls, want 4", n)
	}
	if st := r.sh.State(); st.State != capsule.UpstreamOK || st.Pending != 0 {
		t.Fatalf("state %+v", st)
	}
}

func TestRejectedGoesToDeadLetterThenRetriedByOperator(t *testing.T) {
	up := &scripted{answers: []error{&upstream.Error{Outcome: upstream.Rejected, Status: 400, Code: "INVALID_PUBLIC_STATUS"}}}
	var failed []uint64
	var mu sync.Mutex
	r := newRig(t, up, Options{OnFailure: func(w capsule.Write, reason string) {
		mu.Lock()
		failed = append(failed, w.Seq)
		mu.Unlock()
	}})
	r.run()
	bad := r.write(decide("bad"))
	good := r.write(decide("good"))
	r.waitDelivered(good)
	if got := up.delivered(); len(got) != 1 || got[0].Seq != good {
		t.Fatalf("delivered %+v", got)
	}
	st := r.sh.State()
	if st.State != capsule.UpstreamRejected || st.DeadLetter != 1 {
		t.Fatalf("state %+v", st)
	}
	mu.Lock()
	if len(failed) != 1 || failed[0] != bad {
		t.Fatalf("failure events %v", failed)
	}
	mu.Unlock()
	dl, _ := r.store.DeadLetters("up")
	if len(dl) != 1 || dl[0].Write.Seq != bad || dl[0].Error == "" {
		t.Fatalf("dead letter %+v", dl)
	}
	// The operator retries it: it is delivered (with its original key) and
	// leaves the dead letter.
	if n, err := r.store.RetryDead(context.Background(), "up", bad); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	r.sh.Kick()
	deadline := time.Now().Add(60 * time.Second)
	for r.store.DeadCount("up") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("retried dead letter not delivered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := up.delivered()
	if got[len(got)-1].Seq != bad || got[len(got)-1].IdempotencyKey != dl[0].Write.IdempotencyKey {
		t.Fatalf("retry delivery %+v", got)
	}
	if st := r.sh.State(); st.State != capsule.UpstreamOK {
		t.Fatalf("state after retry %+v", st)
	}
}

func TestRateLimitedHonoursRetryAfter(t *testing.T) {
	// Paused while the upstream's Retry-After runs, showing when it tries
	// next: five minutes (under the cap on Retry-After), so that the pause
	// is there to be seen however slow the machine.
	long := &scripted{answers: []error{&upstream.Error{Outcome: upstream.RateLimited, Status: 429, RetryAfter: 5 * time.Minute}}}
	lr := newRig(t, long, Options{})
	lr.run()
	lr.write(decide("x"))
	var st capsule.UpstreamState
	deadline := time.Now().Add(60 * time.Second)
	for st = lr.sh.State(); st.State != capsule.UpstreamPaused; st = lr.sh.State() {
		if time.Now().After(deadline) {
			t.Fatalf("during Retry-After: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	long.mu.Lock()
	first := long.calls[0]
	long.mu.Unlock()
	if st.NextAttempt == nil || st.NextAttempt.Before(first.Add(5*time.Minute-time.Second)) {
		t.Fatalf("during Retry-After (5 min after %s): %+v", first, st)
	}

	// Once it has passed, the write goes, never before.
	up := &scripted{answers: []error{&upstream.Error{Outcome: upstream.RateLimited, Status: 429, RetryAfter: 300 * time.Millisecond}}}
	r := newRig(t, up, Options{})
	r.run()
	seq := r.write(decide("x"))
	r.waitDelivered(seq)
	if gap := up.calls[1].Sub(up.calls[0]); gap < 300*time.Millisecond {
		t.Fatalf("retried after %v, before Retry-After", gap)
	}
}

func TestUnauthorizedRetriesAtOnceOnKick(t *testing.T) {
	up := &scripted{answers: []error{&upstream.Error{Outcome: upstream.Unauthorized, Status: 401}}}
	r := newRig(t, up, Options{UnauthorizedRetry: time.Hour})
	r.run()
	seq := r.write(decide("x"))
	deadline := time.Now().Add(60 * time.Second)
	for r.sh.State().State != capsule.UpstreamUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("never unauthorized")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.sh.Kick() // the token was reloaded
	r.waitDelivered(seq)
}

func TestStoppedUpstreamPausesUntilResumeResidency(t *testing.T) {
	up := &scripted{answers: []error{&upstream.Error{Outcome: upstream.Stopped, Status: 409, Code: "RESIDENCY_STOPPED"}}}
	r := newRig(t, up, Options{})
	r.run()
	blocked := r.write(decide("while stopped"))
	deadline := time.Now().Add(60 * time.Second)
	for r.sh.State().State != capsule.UpstreamPaused {
		if time.Now().After(deadline) {
			t.Fatal("never paused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Not sent while paused: the checks below find it in the dead letter
	// and only the resume delivered.
	more := r.write(focus("still stopped upstream"))
	resume := r.write(&capsule.Checkpoint{ResumeResidency: true})
	r.waitDelivered(resume)
	got := up.delivered()
	if len(got) != 1 || !got[0].Checkpoint.ResumeResidency {
		t.Fatalf("after resume: %+v", got)
	}
	dl, _ := r.store.DeadLetters("up")
	if len(dl) != 2 || dl[0].Write.Seq != blocked || dl[1].Write.Seq != more {
		t.Fatalf("writes refused while stopped should be in the dead letter: %+v", dl)
	}
}

// TestNeverFasterThanTheLimit: 20/s with a burst of 3, 23 writes need at
// least one second, whether each call waits for its token or an upstream
// that flushes takes a batch's tokens at once.
func TestNeverFasterThanTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		rig  func(t *testing.T, o Options) (*rig, *scripted)
	}{
		{"one call a write", func(t *testing.T, o Options) (*rig, *scripted) {
			up := &scripted{}
			return newRig(t, up, o), up
		}},
		{"flushed in batches", func(t *testing.T, o Options) (*rig, *scripted) {
			up := &flushing{}
			return newRigFor(t, up, &up.scripted, o), &up.scripted
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, up := tc.rig(t, Options{Limiter: rate.NewLimiter(20, 3)})
			var last uint64
			for i := 0; i < 23; i++ {
				last = r.write(decide(fmt.Sprint(i)))
			}
			start := time.Now()
			r.run()
			r.waitDelivered(last)
			if el := time.Since(start); el < 950*time.Millisecond {
				t.Fatalf("23 writes in %v: faster than 20/s with burst 3", el)
			}
			if len(up.delivered()) != 23 {
				t.Fatalf("%d delivered", len(up.delivered()))
			}
		})
	}
}

func TestSkipsKindsTheUpstreamDoesNotTake(t *testing.T) {
	up := &scripted{kinds: map[capsule.WriteKind]bool{capsule.WriteCapsule: true}}
	r := newRig(t, up, Options{})
	r.run()
	r.write(decide("not for this upstream"))
	seq, err := r.store.PutCapsule(context.Background(), &capsule.Capsule{Version: "1", Goal: "g"}, false, capsule.OriginExplicit)
	if err != nil {
		t.Fatal(err)
	}
	r.waitDelivered(seq)
	if got := up.delivered(); len(got) != 1 || got[0].Kind != capsule.WriteCapsule {
		t.Fatalf("delivered %+v", got)
	}
}

func ptr(s string) *string { return &s }

// flushing is a scripted upstream that makes deliveries durable in Flush,
// like the local archive, and takes checkpoints only.
type flushing struct {
	scripted
	flushErrs []error
	flushes   int
}

func (f *flushing) Flush(ctx context.Context, agent string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
	if len(f.flushErrs) > 0 {
		err := f.flushErrs[0]
		f.flushErrs = f.flushErrs[1:]
		return err
	}
	return nil
}

// TestSkippedKindNeverAcknowledgesAnUnflushedBatch: a write of a kind the
// upstream does not take, after one delivered but not yet flushed, must not
// acknowledge the batch before Flush succeeds.
func TestSkippedKindNeverAcknowledgesAnUnflushedBatch(t *testing.T) {
	up := &flushing{scripted: scripted{kinds: map[capsule.WriteKind]bool{capsule.WriteCheckpoint: true}},
		flushErrs: []error{&upstream.Error{Outcome: upstream.Retry, Err: fmt.Errorf("disk full")}}}
	r := &rig{t: t, up: &up.scripted, done: make(chan struct{})}
	var err error
	var sh *Shipper
	r.store, err = residency.Open(residency.Options{Agent: "a", Dir: t.TempDir(), Upstreams: []string{"up"},
		OnCommit: func([]residency.Event) {
			if sh != nil {
				sh.Notify()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	sh = New(Options{Agent: "a", Store: r.store, Upstream: up, Upstreams: []string{"up"}, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	r.sh = sh
	r.write(decide("to be flushed"))
	last, err := r.store.PutCapsule(context.Background(), &capsule.Capsule{Version: "1"}, false, capsule.OriginExplicit)
	if err != nil {
		t.Fatal(err)
	}
	r.run()
	r.waitDelivered(last)
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.flushes != 2 || len(up.got) != 2 {
		t.Fatalf("flushes %d, deliveries %d: the failed flush's batch was not sent again", up.flushes, len(up.got))
	}
}

// recovering is a scripted upstream that keeps local files a crash can
// tear, like the local archive: it records when Recover is called.
type recovering struct {
	scripted
	recoverErr error
	recovered  []string // agents, in call order
	deliveries int      // deliveries seen when Recover was called
}

func (r *recovering) Recover(agent string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recovered = append(r.recovered, agent)
	r.deliveries = len(r.got)
	return r.recoverErr
}

// The outbox repairs its upstream's files once at start, before the first
// delivery, even with nothing to deliver; a failed repair is logged and
// delivery goes on (the archive repairs again at its next append).
func TestRecoversBeforeTheFirstDelivery(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			up := &recovering{}
			if fail {
				up.recoverErr = errors.New("archive x: permission denied")
			}
			var logs bytes.Buffer
			r := newRigFor(t, up, &up.scripted, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			seq := r.write(focus("written before the start"))
			r.run()
			r.waitDelivered(seq)
			r.stop()
			up.mu.Lock()
			defer up.mu.Unlock()
			if len(up.recovered) != 1 || up.recovered[0] != "a" || up.deliveries != 0 {
				t.Fatalf("Recover calls %v, after %d deliveries; want one for agent a, before any", up.recovered, up.deliveries)
			}
			if fail != strings.Contains(logs.String(), "permission denied") {
				t.Fatalf("the failed repair logged (want %v): %s", fail, logs.String())
			}
		})
	}
}

// TestLingerPacesShortBatches: with a linger, a write that comes alone is
// sent and flushed at once; writes that come within the linger after it
// wait for its end and then share one flush. Driven step by step, the
// linger's end made to come by moving the last batch back an hour.
func TestLingerPacesShortBatches(t *testing.T) {
	up := &flushing{}
	r := newRigFor(t, up, &up.scripted, Options{Linger: time.Hour})
	t.Cleanup(r.stop)
	var attempt int
	step := func() time.Duration {
		t.Helper()
		wait, err := r.sh.step(context.Background(), &attempt)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}

	first := r.write(focus("alone"))
	if wait := step(); wait != 0 || r.sh.deliveredSeq() != first || up.flushes != 1 {
		t.Fatalf("a lone write: wait %v, delivered seq %d (want %d), %d flushes (want 1)", wait, r.sh.deliveredSeq(), first, up.flushes)
	}

	r.write(decide("soon after"))
	last := r.write(decide("and another"))
	if wait := step(); wait < 59*time.Minute || r.sh.deliveredSeq() != first {
		t.Fatalf("writes within the linger: wait %v (want the rest of the hour), delivered seq %d (want %d)", wait, r.sh.deliveredSeq(), first)
	}

	r.sh.lastShort = r.sh.lastShort.Add(-time.Hour)
	for range 3 {
		if r.sh.deliveredSeq() == last {
			break
		}
		if wait := step(); wait != 0 {
			t.Fatalf("after the linger: wait %v", wait)
		}
	}
	if r.sh.deliveredSeq() != last || len(up.delivered()) != 3 || up.flushes != 2 {
		t.Fatalf("after the linger: delivered seq %d (want %d), %d deliveries (want 3), %d flushes (want 2: one for the two that waited)",
			r.sh.deliveredSeq(), last, len(up.delivered()), up.flushes)
	}
}
