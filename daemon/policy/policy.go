package policy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// Store is what the policy needs of the residency (residency.Store
// satisfies it).
type Store interface {
	// CheckpointIf stores cp only if the state is still at sequence number
	// ifSeq, and returns capsule.ErrStaleState otherwise.
	CheckpointIf(ctx context.Context, cp *capsule.Checkpoint, origin capsule.Origin, ifSeq uint64) (uint64, error)
	PutCapsule(ctx context.Context, c *capsule.Capsule, sealed bool, origin capsule.Origin) (uint64, error)
	// Resume reads the state; it never counts as the agent's visit.
	Resume() capsule.Resume
	Capsule() *capsule.CapsuleRecord
	// Work stores a work record (see Snapshotter); qday is the part Q-Day
	// may take, dropped by the store when the agent wrote its own working
	// state after since. Seq 0: nothing stored (the residency is stopped).
	Work(ctx context.Context, w *capsule.Work, qday *capsule.Checkpoint, since time.Time) (uint64, error)
}

// Sealer builds the capsule to seal from the state (the daemon passes its
// own builder, the same one POST /v1/capsule/seal uses) and checks it with
// the guard. draft is the latest capsule (or a newer one from the handoff
// file), nil when there is none.
type Sealer func(st capsule.Resume, draft *capsule.CapsuleRecord, now time.Time) (*capsule.Capsule, error)

// InputKind tells what an Input is.
type InputKind int

// Kinds of input.
const (
	// KindTick is a timer: the daemon sends it at NextDeadline (Run does).
	KindTick InputKind = iota
	// KindActivity: files changed in the work directory, or a prompt/tool
	// signal seen outside the signal path.
	KindActivity
	// KindSignal: a context signal (Input.Signal), already stored.
	KindSignal
	// KindDerived: content parsed from the agent's handoff file
	// (Input.Derived), already guarded.
	KindDerived
	// KindCheckpoint: the agent stored a checkpoint of its own; with a
	// Snapshotter, a work record follows (snapshots.on_explicit_checkpoint).
	KindCheckpoint
)

func (k InputKind) String() string {
	switch k {
	case KindTick:
		return "tick"
	case KindActivity:
		return "activity"
	case KindSignal:
		return "signal"
	case KindDerived:
		return "derived"
	case KindCheckpoint:
		return "checkpoint"
	}
	return "unknown"
}

// Input is what the daemon feeds the policy, one at a time.
type Input struct {
	Kind InputKind
	// At is when it happened; zero (or later than the clock) means now.
	At      time.Time
	Signal  *capsule.Signal
	Derived *Derived
}

// Derived is content parsed from the agent's handoff file; the
// daemon has already guarded it. A nil field was not in the file.
type Derived struct {
	Source     string    // e.g. "HANDOFF.md"
	ChangedAt  time.Time // the file's mtime
	Focus      *string   // goal
	NextAction *string   // next
	LastResult *string   // done
	WaitingFor *string   // blockers; "" clears waiting_for
	// Capsule is the capsule draft, when the file gave one.
	Capsule *capsule.Capsule
}

// Triggers, as Action.Trigger names them.
const (
	TriggerQuiet         = "quiet"
	TriggerThreshold     = "threshold"
	TriggerPreCompaction = "pre_compaction"
	TriggerSessionEnd    = "session_end"
	TriggerIdle          = "idle"
	TriggerRefresh       = "refresh"
	TriggerDerived       = "derived" // a capsule draft from the handoff file, stored unsealed
)

// Public status phases and the neutral next_action the policy writes for
// each.
const (
	PhaseActing  = "acting"
	PhaseWaiting = "waiting"
	PhaseResting = "resting"

	TextActing  = "working"
	TextWaiting = "waiting for the next instruction"
	TextResting = "session ended"
)

var neutralText = map[string]string{PhaseActing: TextActing, PhaseWaiting: TextWaiting, PhaseResting: TextResting}

// ErrRateLimited is an Action's error when the hourly cap held a write
// back; it is retried once a slot frees.
var ErrRateLimited = errors.New("automatic write held back by the hourly cap")

// Action is one write the policy attempted: a checkpoint, or a capsule
// (Sealed for a seal).
type Action struct {
	Trigger string
	Seq     uint64
	Sealed  bool
	Capsule bool // a capsule write (PutCapsule), not a checkpoint
	Work    bool // a work record (Store.Work)
	Err     error
}

// sealReserve is how many of the hourly cap's slots only compaction and
// session end (a checkpoint and a seal each) may use, so that no storm of
// other triggers can keep a capsule from being sealed.
const sealReserve = 4

// maxFires bounds the timers fired by one Handle: each firing moves its
// own deadline forward, so this is only a guard.
const maxFires = 16

type pendingField struct {
	val *string
	at  time.Time
}

// pending is derived content not yet applied, field by field, newest first.
type pending struct {
	focus, next, last, waiting pendingField
	capsule                    *capsule.Capsule
	capsuleAt                  time.Time
}

// Policy is one agent's automatic checkpoint policy. Its methods are safe
// for concurrent use, but it is meant to be driven by Run (or a test).
type Policy struct {
	agent string
	cfg   Config
	store Store
	seal  Sealer
	log   *slog.Logger
	now   func() time.Time
	cap   int

	mu sync.Mutex

	// Activity and phase.
	lastActivity time.Time
	ended        bool
	phase        string    // desired phase; "" until the first event says one
	phaseAt      time.Time // when the policy's view of the phase last changed
	stopped      bool      // the residency was stopped when last read

	// Quiet period.
	quietArmed bool
	burstStart time.Time
	lastInput  time.Time
	lastQuiet  time.Time

	// Thresholds.
	armed []bool

	// Public status.
	lastPSAt  time.Time             // last saved public status, anyone's
	lastSent  *capsule.PublicStatus // the last one the policy sent
	agentPS   *capsule.PublicStatus // the agent's own latest
	agentPSAt time.Time

	// Derived content and whose the stored values are.
	pend           pending
	ourFocusAt     time.Time // FocusUpdatedAt of the policy's last focus write
	agentFocusAt   time.Time // latest focus write by the agent
	agentWSAt      time.Time // latest working_state write by the agent
	ourCapsuleSeq  uint64    // seq of the policy's last capsule write
	agentCapsuleAt time.Time

	// Rate cap.
	writes   []time.Time // successful automatic writes in the last hour, oldest first
	owed     string      // a trigger held back by the cap, retried at capFree
	owedSeal bool

	errLogged map[string]bool

	// Work snapshots (work.go).
	snap      Snapshotter
	workSince time.Time // the last work record, or when snapshots began
}

// New builds the policy of one agent; it reads the store's current state
// (context usage, session, public status) to start from. log may be nil.
func New(agent string, cfg Config, store Store, seal Sealer, log *slog.Logger, now func() time.Time) *Policy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	enabled := cfg.Enabled
	cfg = cfg.normalized()
	cfg.Enabled = enabled
	p := &Policy{
		agent:     agent,
		cfg:       cfg,
		store:     store,
		seal:      seal,
		log:       log.With("agent", agent, "component", "policy"),
		now:       now,
		cap:       cfg.MaxPerHour(),
		armed:     make([]bool, len(cfg.Thresholds)),
		errLogged: map[string]bool{},
	}
	for i := range p.armed {
		p.armed[i] = true
	}
	if !cfg.Enabled {
		return p
	}
	st := store.Resume()
	p.observe(st)
	if f := st.Context.UsedFraction; f != nil {
		for i, t := range cfg.Thresholds {
			p.armed[i] = *f < t
		}
	}
	p.ended = st.Context.Session == "end"
	return p
}

// Config returns the configuration in force (defaults filled in).
func (p *Policy) Config() Config { return p.cfg }

// Handle applies one input, then fires every timer that is due, and
// returns the writes it attempted.
func (p *Policy) Handle(ctx context.Context, in Input) []Action {
	if !p.cfg.Enabled {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	at := in.At
	if at.IsZero() && in.Kind == KindSignal && in.Signal != nil {
		at = in.Signal.At
	}
	if at.IsZero() || at.After(now) {
		at = now
	}
	var acts []Action
	switch in.Kind {
	case KindActivity:
		p.activity(at)
	case KindSignal:
		if in.Signal != nil {
			acts = p.signal(ctx, in.Signal, at, now)
		}
	case KindDerived:
		if in.Derived != nil {
			p.derived(in.Derived, at)
		}
	case KindCheckpoint:
		if p.snap != nil {
			acts = p.fire(ctx, plan{trigger: TriggerCheckpoint, status: statusIfChanged, workOnly: true}, now)
		}
	}
	return append(acts, p.fireDue(ctx, now)...)
}

// NextDeadline is when the next Tick is due: the end of a quiet period, the
// idle transition, the next status refresh, or a write the cap held back.
// It is false when nothing is pending: the daemon then waits for input
// only.
func (p *Policy) NextDeadline() (time.Time, bool) {
	if !p.cfg.Enabled {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, at, ok := p.next()
	return at, ok
}

// Run drives the policy: it handles inputs as they come and ticks it at
// NextDeadline with a single timer, until ctx is done or in is closed.
func (p *Policy) Run(ctx context.Context, in <-chan Input) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var fire <-chan time.Time
		if at, ok := p.NextDeadline(); ok {
			timer.Reset(max(at.Sub(p.now()), 0))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case x, ok := <-in:
			if !ok {
				return
			}
			p.Handle(ctx, x)
		case <-fire:
			p.Handle(ctx, Input{Kind: KindTick})
		}
		timer.Stop()
	}
}

// --- inputs ---

func (p *Policy) activity(at time.Time) {
	if at.After(p.lastActivity) {
		p.lastActivity = at
	}
	p.ended = false
	if p.phase != PhaseActing {
		p.phase, p.phaseAt = PhaseActing, at
	}
	p.armQuiet(at)
}

func (p *Policy) armQuiet(at time.Time) {
	if !p.quietArmed {
		p.quietArmed, p.burstStart = true, at
	}
	if at.After(p.lastInput) {
		p.lastInput = at
	}
}

func (p *Policy) derived(d *Derived, at time.Time) {
	changed := d.ChangedAt
	if changed.IsZero() {
		changed = at
	}
	set := func(f *pendingField, v *string) {
		if v != nil && !changed.Before(f.at) {
			s := *v
			f.val, f.at = &s, changed
		}
	}
	set(&p.pend.focus, d.Focus)
	set(&p.pend.next, d.NextAction)
	set(&p.pend.last, d.LastResult)
	set(&p.pend.waiting, d.WaitingFor)
	if d.Capsule != nil && !changed.Before(p.pend.capsuleAt) {
		c := *d.Capsule
		p.pend.capsule, p.pend.capsuleAt = &c, changed
	}
	p.log.Debug("derived content pending until the next checkpoint", "source", d.Source)
	p.armQuiet(at)
}

func (p *Policy) signal(ctx context.Context, s *capsule.Signal, at, now time.Time) []Action {
	switch s.Kind {
	case capsule.SignalActivity:
		p.activity(at)
		if s.Event == "prompt" {
			return p.turn(ctx, TriggerTurnStart, now)
		}
	case capsule.SignalContext:
		if s.UsedFraction == nil {
			return nil
		}
		f, crossed := *s.UsedFraction, false
		for i, t := range p.cfg.Thresholds {
			switch {
			case f >= t && p.armed[i]:
				p.armed[i], crossed = false, true
			case f < t-p.cfg.Hysteresis:
				p.armed[i] = true
			}
		}
		if crossed {
			return p.fire(ctx, plan{trigger: TriggerThreshold, status: statusAlways}, now)
		}
	case capsule.SignalCompaction:
		switch s.Phase {
		case "pre":
			return p.fire(ctx, plan{trigger: TriggerPreCompaction, status: statusAlways, seal: p.cfg.SealOnCompaction}, now)
		case "post":
			p.rearm()
		}
	case capsule.SignalSession:
		switch s.Event {
		case "start":
			p.rearm()
			p.activity(at)
		case "stop": // the agent's turn ended: its last activity for now
			p.activity(at)
			return p.turn(ctx, TriggerTurnEnd, now)
		case "end":
			p.ended, p.quietArmed = true, false
			p.phase, p.phaseAt = PhaseResting, at
			return p.fire(ctx, plan{trigger: TriggerSessionEnd, status: statusAlways, seal: p.cfg.SealOnSessionEnd}, now)
		}
	}
	return nil
}

func (p *Policy) rearm() {
	for i := range p.armed {
		p.armed[i] = true
	}
}

// --- timers ---

type timerKind int

const (
	timerNone timerKind = iota
	timerQuiet
	timerIdle
	timerRefresh
	timerOwed
)

// next returns the earliest pending timer.
func (p *Policy) next() (timerKind, time.Time, bool) {
	kind, best := timerNone, time.Time{}
	consider := func(k timerKind, at time.Time) {
		if kind == timerNone || at.Before(best) {
			kind, best = k, at
		}
	}
	if p.quietArmed {
		consider(timerQuiet, p.quietDue())
	}
	if p.cfg.PublicStatus && !p.stopped && !p.ended && p.phase == PhaseActing && !p.lastActivity.IsZero() {
		consider(timerIdle, p.lastActivity.Add(p.cfg.IdleAfter))
	}
	if p.cfg.PublicStatus && !p.stopped && !p.ended && !p.lastPSAt.IsZero() && !p.lastActivity.IsZero() {
		if at := p.lastPSAt.Add(p.cfg.Refresh); at.Before(p.lastActivity.Add(p.cfg.Alive)) {
			consider(timerRefresh, at)
		}
	}
	if p.owed != "" {
		// When enough writes have left the hour for the held-back one.
		limit := p.cap - sealReserve
		if p.owedSeal {
			limit = p.cap
		}
		at := time.Time{}
		if k := len(p.writes) - limit; k >= 0 {
			at = p.writes[k].Add(time.Hour)
		}
		consider(timerOwed, at)
	}
	return kind, best, kind != timerNone
}

func (p *Policy) quietDue() time.Time {
	at := p.lastInput.Add(p.cfg.Quiet)
	if m := p.burstStart.Add(p.cfg.MaxDelay); m.Before(at) {
		at = m
	}
	if !p.lastQuiet.IsZero() {
		if m := p.lastQuiet.Add(p.cfg.MinInterval); m.After(at) {
			at = m
		}
	}
	return at
}

// fireDue fires every timer due at now, earliest first.
func (p *Policy) fireDue(ctx context.Context, now time.Time) []Action {
	var acts []Action
	for range maxFires {
		kind, at, ok := p.next()
		if !ok || at.After(now) {
			break
		}
		switch kind {
		case timerQuiet:
			p.quietArmed = false
			acts = append(acts, p.fire(ctx, plan{trigger: TriggerQuiet, status: statusIfChanged, quiet: true}, now)...)
		case timerIdle:
			p.phase, p.phaseAt = PhaseWaiting, at
			acts = append(acts, p.fire(ctx, plan{trigger: TriggerIdle, status: statusIfChanged}, now)...)
		case timerRefresh:
			acts = append(acts, p.refresh(ctx, now)...)
		case timerOwed:
			trig, seal := p.owed, p.owedSeal
			p.owed, p.owedSeal = "", false
			acts = append(acts, p.fire(ctx, plan{trigger: trig, status: statusIfChanged, seal: seal, workOnly: trig == TriggerCheckpoint}, now)...)
		}
	}
	return acts
}

func (p *Policy) refresh(ctx context.Context, now time.Time) []Action {
	last := p.lastPSAt
	// A status the agent saved meanwhile moves the refresh.
	st := p.store.Resume()
	p.observe(st)
	if p.lastPSAt.After(last) && now.Before(p.lastPSAt.Add(p.cfg.Refresh)) {
		return nil
	}
	p.lastPSAt = now // the next attempt is a full Refresh away, whatever happens now
	return p.fireWith(ctx, plan{trigger: TriggerRefresh, status: statusAlways}, st, now)
}

// --- sending ---

type statusMode int

const (
	statusIfChanged statusMode = iota // only when it changes, or none was ever saved
	statusAlways                      // re-send it
)

// plan is what a trigger may send.
type plan struct {
	trigger string
	status  statusMode
	seal    bool
	quiet   bool // a quiet-period checkpoint (MinInterval applies)
	// workOnly: only the snapshot step (after the agent's own checkpoint).
	workOnly bool
}

func (p *Policy) fire(ctx context.Context, pl plan, now time.Time) []Action {
	st := p.store.Resume()
	p.observe(st)
	return p.fireWith(ctx, pl, st, now)
}

// staleRetries bounds how often fireWith reads the state again when a
// write of the agent's lands between its read and its checkpoint.
const staleRetries = 3

// fireWith sends what pl allows, given the state st: one checkpoint with
// pending derived fields and the public status, then a sealed capsule or a
// pending capsule draft. The checkpoint is conditional on st being current,
// so what it derived from st never overwrites a newer write; if st went
// stale, it reads the state again and decides afresh.
func (p *Policy) fireWith(ctx context.Context, pl plan, st capsule.Resume, now time.Time) []Action {
	// The work record first, so that a capsule sealed below carries its
	// receipt.
	work, wrote := p.work(ctx, pl, st, now)
	if pl.workOnly {
		return work
	}
	if wrote {
		st = p.store.Resume()
	}
	for range staleRetries {
		acts, stale := p.fireOnce(ctx, pl, st, now)
		if !stale {
			return append(work, acts...)
		}
		st = p.store.Resume()
		p.observe(st)
	}
	p.log.Debug("the state kept changing under the policy; it tries again at the next trigger", "trigger", pl.trigger)
	return work
}

// fireOnce is one attempt of fireWith; stale reports that st was no longer
// current and nothing was sent.
func (p *Policy) fireOnce(ctx context.Context, pl plan, st capsule.Resume, now time.Time) (acts []Action, stale bool) {
	if st.Stopped != nil {
		p.log.Debug("residency stopped: the policy sends nothing", "trigger", pl.trigger)
		return nil, false
	}
	cp := &capsule.Checkpoint{}
	applied := p.derivedInto(cp, st)
	if p.cfg.PublicStatus {
		if target := p.targetStatus(st, now); target != nil {
			changed := st.PublicStatus == nil || !equalStatus(&st.PublicStatus.PublicStatus, target)
			if pl.status == statusAlways || changed {
				cp.PublicStatus = target
			}
		}
	}
	if pl.trigger == TriggerThreshold && cp.Focus == nil && cp.WorkingState == nil && cp.PublicStatus != nil &&
		st.PublicStatus != nil && equalStatus(cp.PublicStatus, &st.PublicStatus.PublicStatus) &&
		now.Sub(p.lastPSAt) < p.cfg.MinInterval {
		// Nothing would change upstream: the same status was saved moments
		// ago.
		cp.PublicStatus = nil
	}
	if cp.IsEmpty() {
		p.log.Debug("nothing to send", "trigger", pl.trigger)
	} else {
		seq, err := p.write(ctx, pl, now, func() (uint64, error) {
			return p.store.CheckpointIf(ctx, cp, capsule.OriginAutomatic, st.Seq)
		})
		if errors.Is(err, capsule.ErrStaleState) {
			return nil, true
		}
		acts = append(acts, Action{Trigger: pl.trigger, Seq: seq, Err: err})
		if err == nil {
			applied()
			if cp.PublicStatus != nil {
				ps := *cp.PublicStatus
				p.lastSent, p.lastPSAt = &ps, now
			}
			if pl.quiet {
				p.lastQuiet = now
			}
			st = p.store.Resume()
			if cp.Focus != nil && st.FocusUpdatedAt != nil && st.Focus == *cp.Focus {
				p.ourFocusAt = *st.FocusUpdatedAt
			}
		}
	}
	switch {
	case pl.seal:
		acts = append(acts, p.sealCapsule(ctx, pl, st, now)...)
	case p.pend.capsule != nil:
		if c := p.capsuleDraft(st); c != nil {
			acts = append(acts, p.putCapsule(ctx, plan{trigger: TriggerDerived}, c, false, now))
		}
	}
	return acts, false
}

// sealCapsule builds the capsule with the Sealer and stores it sealed.
func (p *Policy) sealCapsule(ctx context.Context, pl plan, st capsule.Resume, now time.Time) []Action {
	if p.seal == nil {
		p.log.Debug("no sealer: nothing sealed", "trigger", pl.trigger)
		return nil
	}
	if !p.allow(now, true) {
		p.holdBack(pl.trigger, true)
		return []Action{{Trigger: pl.trigger, Sealed: true, Capsule: true, Err: ErrRateLimited}}
	}
	var draft *capsule.CapsuleRecord
	if c := p.capsuleDraft(st); c != nil {
		draft = &capsule.CapsuleRecord{Capsule: *c, StoredAt: p.pend.capsuleAt}
	} else if rec := p.store.Capsule(); rec != nil {
		draft = rec
	}
	c, err := p.seal(st, draft, now)
	if err != nil {
		p.report(pl.trigger+" seal", err)
		return []Action{{Trigger: pl.trigger, Sealed: true, Capsule: true, Err: err}}
	}
	p.pend.capsule = nil // the sealed capsule supersedes the draft
	return []Action{p.putCapsule(ctx, pl, c, true, now)}
}

func (p *Policy) putCapsule(ctx context.Context, pl plan, c *capsule.Capsule, sealed bool, now time.Time) Action {
	seq, err := p.write(ctx, plan{trigger: pl.trigger, seal: sealed}, now, func() (uint64, error) {
		return p.store.PutCapsule(ctx, c, sealed, capsule.OriginAutomatic)
	})
	if err == nil {
		p.ourCapsuleSeq = seq
		if !sealed {
			p.pend.capsule = nil
		}
	}
	return Action{Trigger: pl.trigger, Seq: seq, Sealed: sealed, Capsule: true, Err: err}
}

// write runs one store write under the hourly cap, and reports its error.
func (p *Policy) write(ctx context.Context, pl plan, now time.Time, do func() (uint64, error)) (uint64, error) {
	if !p.allow(now, pl.seal || pl.trigger == TriggerPreCompaction || pl.trigger == TriggerSessionEnd) {
		p.holdBack(pl.trigger, pl.seal)
		return 0, ErrRateLimited
	}
	seq, err := do()
	if errors.Is(err, capsule.ErrStaleState) {
		return 0, err // not a failure: the caller reads again
	}
	if err != nil {
		var ce *capsule.Error
		if errors.As(err, &ce) && ce.Code == capsule.CodeResidencyStopped {
			p.stopped = true
		}
		p.report(pl.trigger, err)
		return 0, err
	}
	p.writes = append(p.writes, now)
	clear(p.errLogged) // the next failure is news again
	p.log.Debug("automatic write", "trigger", pl.trigger, "seq", seq)
	return seq, nil
}

// allow reports whether the hourly cap leaves room for one more write. The
// last sealReserve slots are kept for compaction and session end.
func (p *Policy) allow(now time.Time, sealing bool) bool {
	cut := now.Add(-time.Hour)
	i := 0
	for i < len(p.writes) && !p.writes[i].After(cut) {
		i++
	}
	p.writes = p.writes[i:]
	if sealing {
		return len(p.writes) < p.cap
	}
	return len(p.writes) < p.cap-sealReserve
}

func (p *Policy) holdBack(trigger string, seal bool) {
	if p.owed == "" {
		p.owed = trigger
	}
	p.owedSeal = p.owedSeal || seal
	p.report(trigger, ErrRateLimited)
}

// report logs an error once per kind (until a write succeeds).
func (p *Policy) report(trigger string, err error) {
	kind := "store"
	var ce *capsule.Error
	switch {
	case errors.Is(err, ErrRateLimited):
		kind = "rate"
	case errors.As(err, &ce):
		kind = ce.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = "canceled"
	}
	if p.errLogged[kind] {
		p.log.Debug("automatic write failed", "trigger", trigger, "err", err)
		return
	}
	p.errLogged[kind] = true
	p.log.Warn("automatic write failed", "trigger", trigger, "kind", kind, "err", err)
}
