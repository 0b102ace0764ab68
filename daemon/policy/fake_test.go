package policy

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

var t0 = time.Date(2026, 8, 8, 9, 0, 0, 0, time.UTC)

// fakeClock is the injected clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

type cpCall struct {
	At     time.Time
	Seq    uint64
	CP     *capsule.Checkpoint
	Origin capsule.Origin
}

type capCall struct {
	At     time.Time
	Seq    uint64
	C      capsule.Capsule
	Sealed bool
	Origin capsule.Origin
}

// fakeStore keeps the parts of the residency the policy reads, applies
// checkpoints the way the residency does, and records every call.
type fakeStore struct {
	t   *testing.T
	mu  sync.Mutex
	clk *fakeClock

	seq      uint64
	st       capsule.Resume
	err      error // returned by every write when set
	cps      []cpCall
	caps     []capCall
	works    []workCall
	calls    int // every write attempted, refused ones included
	resumeCt int
	// beforeWrite, when set, runs once just before the next conditional
	// checkpoint: a write of the agent's landing after the policy read.
	beforeWrite func()
}

func newFakeStore(t *testing.T, clk *fakeClock) *fakeStore {
	return &fakeStore{t: t, clk: clk, st: capsule.Resume{Agent: "builder"}}
}

func (s *fakeStore) CheckpointIf(ctx context.Context, cp *capsule.Checkpoint, origin capsule.Origin, ifSeq uint64) (uint64, error) {
	if f := s.beforeWrite; f != nil {
		s.beforeWrite = nil
		f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return 0, s.err
	}
	if s.st.Seq != ifSeq {
		return 0, capsule.ErrStaleState
	}
	if s.st.Stopped != nil && !cp.ResumeResidency {
		return 0, capsule.Refuse(capsule.CodeResidencyStopped, "", "stopped")
	}
	if cp.IsEmpty() {
		s.t.Errorf("the policy sent an empty checkpoint")
		return 0, capsule.Refuse(capsule.CodeEmptyCheckpoint, "", "empty")
	}
	if origin == capsule.OriginAutomatic {
		checkGuard(s.t, cp)
	}
	return s.applyLocked(cp, origin), nil
}

func (s *fakeStore) applyLocked(cp *capsule.Checkpoint, origin capsule.Origin) uint64 {
	now := s.clk.Now()
	s.seq++
	st := &s.st
	if cp.Stop != nil {
		st.Stopped = &capsule.StopRecord{Reason: cp.Stop.Reason, At: now}
	}
	if cp.ResumeResidency {
		st.Stopped = nil
	}
	if cp.Focus != nil {
		st.Focus, st.FocusUpdatedAt = *cp.Focus, &now
	}
	if ws := cp.WorkingState; ws != nil {
		rec := capsule.WorkingStateRecord{}
		if st.WorkingState != nil {
			rec = *st.WorkingState
		}
		if ws.NextAction != nil {
			rec.NextAction = *ws.NextAction
		}
		if ws.LastResult != nil {
			rec.LastResult = *ws.LastResult
		}
		if ws.WaitingFor.Set {
			rec.WaitingFor = ws.WaitingFor.Ptr()
		}
		rec.UpdatedAt, rec.Origin = now, origin
		st.WorkingState = &rec
	}
	if cp.PublicStatus != nil {
		st.PublicStatus = &capsule.PublicStatusRecord{PublicStatus: *cp.PublicStatus, UpdatedAt: now}
	}
	st.Seq = s.seq
	st.LastWriteAt = &now
	s.cps = append(s.cps, cpCall{At: now, Seq: s.seq, CP: cp, Origin: origin})
	return s.seq
}

func (s *fakeStore) PutCapsule(ctx context.Context, c *capsule.Capsule, sealed bool, origin capsule.Origin) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return 0, s.err
	}
	now := s.clk.Now()
	s.seq++
	s.st.Capsule = &capsule.CapsuleRecord{Capsule: *c, StoredAt: now, Sealed: sealed, Seq: s.seq}
	s.caps = append(s.caps, capCall{At: now, Seq: s.seq, C: *c, Sealed: sealed, Origin: origin})
	return s.seq, nil
}

type workCall struct {
	At    time.Time
	Seq   uint64
	W     capsule.Work
	QDay  *capsule.Checkpoint
	Since time.Time
}

func (s *fakeStore) Work(ctx context.Context, w *capsule.Work, qday *capsule.Checkpoint, since time.Time) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return 0, s.err
	}
	if s.st.Stopped != nil {
		return 0, nil
	}
	if ws := s.st.WorkingState; ws != nil && ws.Origin == capsule.OriginExplicit && ws.UpdatedAt.After(since) {
		qday = nil
	}
	s.seq++
	s.st.Seq = s.seq
	s.works = append(s.works, workCall{At: s.clk.Now(), Seq: s.seq, W: *w, QDay: qday, Since: since})
	return s.seq, nil
}

func (s *fakeStore) Resume() capsule.Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumeCt++
	r := s.st
	if r.WorkingState != nil {
		ws := *r.WorkingState
		r.WorkingState = &ws
	}
	if r.PublicStatus != nil {
		ps := *r.PublicStatus
		r.PublicStatus = &ps
	}
	if r.Capsule != nil {
		c := *r.Capsule
		r.Capsule = &c
	}
	return r
}

func (s *fakeStore) Capsule() *capsule.CapsuleRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Capsule == nil {
		return nil
	}
	c := *s.st.Capsule
	return &c
}

// agentWrites applies an explicit checkpoint, as the agent's own write.
func (s *fakeStore) agentWrites(cp *capsule.Checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked(cp, capsule.OriginExplicit)
	s.cps = s.cps[:len(s.cps)-1] // only automatic writes are counted
}

func (s *fakeStore) agentPutsCapsule(c capsule.Capsule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.st.Capsule = &capsule.CapsuleRecord{Capsule: c, StoredAt: s.clk.Now(), Seq: s.seq}
}

func (s *fakeStore) set(f func(st *capsule.Resume)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
}

func (s *fakeStore) checkpoints() []cpCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cpCall(nil), s.cps...)
}

func (s *fakeStore) capsules() []capCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]capCall(nil), s.caps...)
}

func (s *fakeStore) writeCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var guardOnce = sync.OnceValues(func() (*guard.Guard, error) { return guard.New(guard.Options{}) })

// checkGuard runs an automatic checkpoint through the same guard an
// explicit one meets: what the policy writes must be a valid checkpoint.
func checkGuard(t *testing.T, cp *capsule.Checkpoint) {
	t.Helper()
	g, err := guardOnce()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.DecodeCheckpoint(body); err != nil {
		t.Errorf("automatic checkpoint %s refused by the guard: %v", body, err)
	}
}

// harness drives a policy with the fake clock and store.
type harness struct {
	t     *testing.T
	clk   *fakeClock
	store *fakeStore
	p     *Policy
	acts  []Action
	seals int
}

func newHarness(t *testing.T, cfg Config, setup ...func(*fakeStore)) *harness {
	t.Helper()
	h := &harness{t: t, clk: &fakeClock{t: t0}}
	h.store = newFakeStore(t, h.clk)
	for _, f := range setup {
		f(h.store)
	}
	sealer := func(st capsule.Resume, draft *capsule.CapsuleRecord, now time.Time) (*capsule.Capsule, error) {
		h.seals++
		c := &capsule.Capsule{Version: "1", WrittenBy: "continuityd", WrittenAt: now.Format(time.RFC3339)}
		if draft != nil {
			*c = draft.Capsule
		}
		if c.Goal == "" {
			c.Goal = st.Focus
		}
		return c, nil
	}
	h.p = New("builder", cfg, h.store, sealer, nil, h.clk.Now)
	return h
}

// handle feeds one input at the current time.
func (h *harness) handle(in Input) []Action {
	h.t.Helper()
	a := h.p.Handle(context.Background(), in)
	h.acts = append(h.acts, a...)
	return a
}

func (h *harness) activity() []Action { return h.handle(Input{Kind: KindActivity}) }

func (h *harness) signal(s capsule.Signal) []Action {
	return h.handle(Input{Kind: KindSignal, Signal: &s})
}

func (h *harness) usage(f float64) []Action {
	return h.signal(capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f})
}

// advanceTo moves the clock to target, ticking the policy at every
// deadline on the way, as Run would.
func (h *harness) advanceTo(target time.Time) []Action {
	h.t.Helper()
	var out []Action
	for i := 0; ; i++ {
		at, ok := h.p.NextDeadline()
		if !ok || at.After(target) {
			break
		}
		if i > 100000 {
			h.t.Fatal("the deadline never moves forward")
		}
		if at.After(h.clk.Now()) {
			h.clk.Set(at)
		}
		out = append(out, h.handle(Input{Kind: KindTick})...)
		if next, ok := h.p.NextDeadline(); ok && !next.After(h.clk.Now()) {
			h.t.Fatalf("a tick at %v left a deadline at %v due", h.clk.Now(), next)
		}
	}
	h.clk.Set(target)
	return out
}

func (h *harness) advance(d time.Duration) []Action { return h.advanceTo(h.clk.Now().Add(d)) }

func str(s string) *string { return &s }
