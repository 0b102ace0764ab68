package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
)

var _ Store = (*residency.Store)(nil)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDefaults(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.MaxPerHour(); got != 70 {
		t.Errorf("MaxPerHour = %d, want 70", got)
	}
	if !c.Enabled || !c.PublicStatus || !c.SealOnCompaction || !c.SealOnSessionEnd ||
		c.Quiet != 20*time.Second || c.MinInterval != time.Minute || c.IdleAfter != 10*time.Minute ||
		c.Refresh != 45*time.Minute || !slices.Equal(c.Thresholds, []float64{0.5, 0.7, 0.85}) {
		t.Errorf("defaults: %+v", c)
	}
	bad := DefaultConfig()
	bad.Refresh = time.Hour
	if bad.Validate() == nil {
		t.Error("a refresh of an hour lets the office drop the agent: want an error")
	}
	bad = DefaultConfig()
	bad.Thresholds = []float64{1.5}
	if bad.Validate() == nil {
		t.Error("threshold 1.5: want an error")
	}
	for _, trig := range []string{"`quiet`", "`threshold`", "`pre_compaction`", "`session_end`", "`idle`", "`refresh`", "| trigger | default | what is sent |", "70"} {
		if !strings.Contains(Table, trig) {
			t.Errorf("Table lacks %s", trig)
		}
	}
}

func TestNoDeadlineWhenNothingPending(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	if at, ok := h.p.NextDeadline(); ok {
		t.Fatalf("fresh policy wants a tick at %v: polling", at)
	}
	// Handled inputs that arm nothing leave nothing pending.
	h.usage(0.2)
	h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "post"})
	if at, ok := h.p.NextDeadline(); ok {
		t.Fatalf("wants a tick at %v with nothing pending", at)
	}

	// Without a managed public status, a burst ends in nothing pending.
	cfg := DefaultConfig()
	cfg.PublicStatus = false
	h = newHarness(t, cfg)
	h.activity()
	h.advance(time.Minute)
	if at, ok := h.p.NextDeadline(); ok {
		t.Fatalf("after the quiet period, wants a tick at %v", at)
	}
	if n := h.store.writeCalls(); n != 0 {
		t.Errorf("%d writes with nothing to send", n)
	}

	// Disabled: nothing at all.
	h = newHarness(t, Config{})
	h.activity()
	h.usage(0.9)
	if _, ok := h.p.NextDeadline(); ok || len(h.acts) != 0 || h.store.writeCalls() != 0 {
		t.Error("a disabled policy acts")
	}
}

func TestQuietPeriod(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	if acts := h.activity(); len(acts) != 0 {
		t.Fatalf("activity wrote at once: %v", acts)
	}
	at, ok := h.p.NextDeadline()
	if !ok || !at.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("deadline %v %v, want quiet end", at, ok)
	}
	h.clk.Advance(10 * time.Second)
	h.activity()
	if at, _ := h.p.NextDeadline(); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("the quiet period does not follow the last activity: %v", at)
	}
	if acts := h.advance(19 * time.Second); len(acts) != 0 {
		t.Fatalf("wrote before the quiet period ended: %v", acts)
	}
	acts := h.advance(time.Second)
	if len(acts) != 1 || acts[0].Trigger != TriggerQuiet || acts[0].Err != nil || acts[0].Seq == 0 {
		t.Fatalf("quiet actions: %+v", acts)
	}
	cps := h.store.checkpoints()
	if len(cps) != 1 {
		t.Fatalf("%d checkpoints", len(cps))
	}
	cp := cps[0]
	if cp.Origin != capsule.OriginAutomatic {
		t.Errorf("origin %s", cp.Origin)
	}
	want := capsule.PublicStatus{Phase: PhaseActing, NextAction: TextActing}
	if cp.CP.PublicStatus == nil || !equalStatus(cp.CP.PublicStatus, &want) || cp.CP.Focus != nil || cp.CP.WorkingState != nil {
		t.Errorf("first quiet checkpoint: %+v", cp.CP)
	}

	// Another burst with nothing new: nothing sent.
	h.advance(2 * time.Minute)
	h.activity()
	if acts := h.advance(time.Minute); len(acts) != 0 {
		t.Errorf("a burst with nothing new wrote: %+v", acts)
	}
}

func TestQuietMinIntervalAndMaxDelay(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(20 * time.Second) // first checkpoint at t0+20s
	// New derived content and a burst right after: the quiet period ends at
	// +45s, deferred to +80s by MinInterval.
	h.clk.Set(t0.Add(25 * time.Second))
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: h.clk.Now(), NextAction: str("write the tests")}})
	if at, _ := h.p.NextDeadline(); !at.Equal(t0.Add(80 * time.Second)) {
		t.Fatalf("deadline %v, want last quiet + MinInterval", at.Sub(t0))
	}
	acts := h.advance(time.Minute)
	if len(acts) != 1 || h.store.checkpoints()[1].At != t0.Add(80*time.Second) {
		t.Fatalf("deferred quiet: %+v at %v", acts, h.store.checkpoints())
	}
	if ws := h.store.checkpoints()[1].CP.WorkingState; ws == nil || *ws.NextAction != "write the tests" {
		t.Fatalf("derived next action not sent: %+v", ws)
	}

	// A burst that never pauses still checkpoints after MaxDelay.
	start := h.clk.Now()
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: start, LastResult: str("parser fixed")}})
	var got []time.Time
	for i := 0; i < 120; i++ { // activity every 5s for 10 minutes
		h.advance(5 * time.Second)
		h.activity()
	}
	for _, c := range h.store.checkpoints()[2:] {
		got = append(got, c.At)
	}
	if len(got) != 1 || !got[0].Equal(start.Add(DefaultMaxDelay)) {
		t.Fatalf("busy burst checkpoints at %v, want one at +5m", got)
	}
}

func TestThresholds(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(time.Minute)
	base := len(h.store.checkpoints())

	check := func(f float64, want int) {
		t.Helper()
		// Activity, and time enough that a status re-send is not redundant.
		h.activity()
		h.advance(2 * time.Minute)
		acts := h.usage(f)
		n := 0
		for _, a := range acts {
			if a.Trigger == TriggerThreshold {
				n++
			}
		}
		if n != want {
			t.Fatalf("usage %.2f: %d threshold checkpoints, want %d (%+v)", f, n, want, acts)
		}
	}
	check(0.3, 0)
	check(0.55, 1)
	check(0.6, 0)
	check(0.9, 1) // crosses 0.7 and 0.85: one checkpoint
	check(0.48, 0)
	check(0.52, 0) // 0.48 is within the hysteresis of 0.5: not re-armed
	check(0.4, 0)
	check(0.51, 1) // re-armed by the drop below 0.45
	check(0.95, 1)
	h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "post"})
	check(0.6, 1) // compaction re-arms

	cps := h.store.checkpoints()[base:]
	if len(cps) != 5 {
		t.Fatalf("%d checkpoints", len(cps))
	}
	// A crossing right after the same status was saved would change
	// nothing upstream: skipped.
	h.usage(0.3)
	h.usage(0.6)
	if acts := h.usage(0.3); len(acts) != 0 {
		t.Fatal(acts)
	}
	if acts := h.usage(0.6); len(acts) != 0 {
		t.Errorf("redundant threshold re-send: %+v", acts)
	}
	for _, c := range cps {
		if c.CP.PublicStatus == nil || c.CP.PublicStatus.Phase != PhaseActing {
			t.Errorf("threshold checkpoint does not re-send the status: %+v", c.CP)
		}
	}

	// Without a public status and nothing derived, a threshold does nothing.
	cfg := DefaultConfig()
	cfg.PublicStatus = false
	h = newHarness(t, cfg)
	if acts := h.usage(0.9); len(acts) != 0 || h.store.writeCalls() != 0 {
		t.Errorf("empty threshold trigger wrote: %+v", acts)
	}
	// With derived content pending, it carries it at once.
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), Focus: str("ship the parser")}})
	h.usage(0.3)
	acts := h.usage(0.6)
	if len(acts) != 1 || h.store.checkpoints()[0].CP.Focus == nil || h.store.checkpoints()[0].CP.PublicStatus != nil {
		t.Errorf("threshold with derived content: %+v %+v", acts, h.store.checkpoints())
	}
}

func TestThresholdsStartFromStoredUsage(t *testing.T) {
	h := newHarness(t, DefaultConfig(), func(s *fakeStore) {
		f := 0.75
		s.st.Context.UsedFraction = &f
	})
	h.activity()
	if acts := h.usage(0.8); len(acts) != 0 {
		t.Errorf("a restart re-fired thresholds already crossed: %+v", acts)
	}
	if acts := h.usage(0.86); len(acts) != 1 {
		t.Errorf("0.85 not fired: %+v", acts)
	}
}

func TestPreCompactionSealsAndCheckpoints(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.clk.Advance(5 * time.Second)
	draft := capsule.Capsule{Version: "1", Goal: "ship the parser", Next: "write tests"}
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: ".continuity/capsule.json", ChangedAt: h.clk.Now(), Focus: str("ship the parser"), Capsule: &draft}})
	acts := h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre", Trigger: "auto"})
	if len(acts) != 2 || acts[0].Trigger != TriggerPreCompaction || acts[0].Sealed ||
		acts[1].Trigger != TriggerPreCompaction || !acts[1].Sealed || acts[1].Err != nil {
		t.Fatalf("pre-compaction actions: %+v", acts)
	}
	cps, caps := h.store.checkpoints(), h.store.capsules()
	if len(cps) != 1 || cps[0].CP.Focus == nil || *cps[0].CP.Focus != "ship the parser" || cps[0].CP.PublicStatus == nil {
		t.Fatalf("pre-compaction checkpoint: %+v", cps)
	}
	if len(caps) != 1 || !caps[0].Sealed || caps[0].C.Next != "write tests" || caps[0].Origin != capsule.OriginAutomatic {
		t.Fatalf("sealed capsule: %+v (the draft from the file must be the sealer's draft)", caps)
	}
	if caps[0].Seq < cps[0].Seq {
		t.Error("sealed before the checkpoint it should reflect")
	}
	// Post: nothing extra; the quiet period has nothing left to send.
	if acts := h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "post"}); len(acts) != 0 {
		t.Errorf("post-compaction wrote: %+v", acts)
	}
	if acts := h.advance(time.Minute); len(acts) != 0 {
		t.Errorf("derived content sent twice: %+v", acts)
	}

	// SealOnCompaction off: the checkpoint only.
	cfg := DefaultConfig()
	cfg.SealOnCompaction = false
	h = newHarness(t, cfg)
	h.activity()
	acts = h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre"})
	if len(acts) != 1 || acts[0].Sealed || h.seals != 0 {
		t.Errorf("seal despite SealOnCompaction=false: %+v", acts)
	}
}

func TestSessionEndAndStart(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "start", Source: "startup"})
	h.advance(time.Minute)
	h.activity()
	h.clk.Advance(3 * time.Second)
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), LastResult: str("parser fixed"), WaitingFor: str("review from Ana")}})
	acts := h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "end", Reason: "logout"})
	if len(acts) != 2 || acts[0].Trigger != TriggerSessionEnd || !acts[1].Sealed {
		t.Fatalf("session end: %+v", acts)
	}
	cps := h.store.checkpoints()
	last := cps[len(cps)-1].CP
	want := capsule.PublicStatus{Phase: PhaseResting, NextAction: TextResting}
	if last.PublicStatus == nil || !equalStatus(last.PublicStatus, &want) {
		t.Errorf("session end status: %+v", last.PublicStatus)
	}
	if ws := last.WorkingState; ws == nil || *ws.LastResult != "parser fixed" || ws.WaitingFor.Value != "review from Ana" {
		t.Errorf("derived content not sent with the session end: %+v", ws)
	}
	if at, ok := h.p.NextDeadline(); ok {
		t.Errorf("after session end, wants a tick at %v", at)
	}
	if acts := h.advance(48 * time.Hour); len(acts) != 0 {
		t.Errorf("wrote after the session ended: %+v", acts)
	}

	// A new session, after the status lapsed: acting again, at once (the
	// refresh is overdue), and only once.
	n := len(h.store.checkpoints())
	acts = h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "start", Source: "resume"})
	acts = append(acts, h.advance(time.Minute)...)
	cps = h.store.checkpoints()
	if len(acts) != 1 || len(cps) != n+1 || cps[n].CP.PublicStatus.Phase != PhaseActing {
		t.Errorf("session start: %+v", acts)
	}

	// A session that ends and starts again within the hour: acting at the
	// quiet period.
	h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "end"})
	h.advance(time.Minute)
	n = len(h.store.checkpoints())
	acts = h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "start", Source: "clear"})
	if len(acts) != 0 {
		t.Errorf("session start wrote at once: %+v", acts)
	}
	acts = h.advance(time.Minute)
	cps = h.store.checkpoints()
	if len(acts) != 1 || acts[0].Trigger != TriggerQuiet || cps[n].CP.PublicStatus.Phase != PhaseActing {
		t.Errorf("session start: %+v", acts)
	}
}

func TestIdleAndRefresh(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(20 * time.Second)
	acts := h.advance(10 * time.Minute)
	if len(acts) != 1 || acts[0].Trigger != TriggerIdle {
		t.Fatalf("idle: %+v", acts)
	}
	cps := h.store.checkpoints()
	want := capsule.PublicStatus{Phase: PhaseWaiting, NextAction: TextWaiting}
	if ps := cps[len(cps)-1].CP.PublicStatus; ps == nil || !equalStatus(ps, &want) {
		t.Fatalf("idle status: %+v", ps)
	}
	idleAt := cps[len(cps)-1].At
	// Refreshes every 45m for as long as the agent is alive (24h after its
	// last activity), then nothing.
	acts = h.advance(30 * time.Hour)
	var times []time.Time
	for _, c := range h.store.checkpoints()[len(cps):] {
		times = append(times, c.At)
		if c.CP.PublicStatus == nil || c.CP.PublicStatus.Phase != PhaseWaiting {
			t.Errorf("refresh sends %+v", c.CP)
		}
	}
	for i, a := range acts {
		if a.Trigger != TriggerRefresh || a.Err != nil {
			t.Errorf("action %d: %+v", i, a)
		}
	}
	lastActivity := t0
	wantN := int(lastActivity.Add(24*time.Hour).Sub(idleAt) / (45 * time.Minute))
	if len(times) != wantN {
		t.Errorf("%d refreshes, want %d", len(times), wantN)
	}
	prev := idleAt
	for _, at := range times {
		if at.Sub(prev) != 45*time.Minute {
			t.Errorf("refresh %v after the previous status, want 45m", at.Sub(prev))
		}
		prev = at
	}
	if at, ok := h.p.NextDeadline(); ok {
		t.Errorf("a day after the last activity, wants a tick at %v", at)
	}
}

func TestRefreshFollowsAgentsOwnStatus(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(20 * time.Second)
	// The agent saves its status itself 30 minutes later: the refresh is
	// due 45 minutes after that, not after the policy's.
	h.advance(30 * time.Minute)
	h.store.agentWrites(&capsule.Checkpoint{PublicStatus: &capsule.PublicStatus{Phase: PhaseWaiting, NextAction: "waiting for CI on the parser"}})
	agentAt := h.clk.Now()
	h.advance(44 * time.Minute)
	n := len(h.store.checkpoints())
	for _, c := range h.store.checkpoints() {
		if c.At.After(agentAt) {
			t.Errorf("refresh %v after the agent's own status", c.At.Sub(agentAt))
		}
	}
	h.advance(2 * time.Minute)
	cps := h.store.checkpoints()
	if len(cps) != n+1 || !cps[n].At.Equal(agentAt.Add(45*time.Minute)) {
		t.Fatalf("refresh at %v", cps[n:])
	}
	if ps := cps[n].CP.PublicStatus; ps.Phase != PhaseWaiting || ps.NextAction != "waiting for CI on the parser" {
		t.Errorf("refresh did not keep the agent's own status: %+v", ps)
	}
}

func TestDerivedNeverOverwritesNewerExplicit(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(time.Minute)
	fileAt := h.clk.Now()
	h.advance(time.Minute)
	// The agent writes focus and working state after the file changed.
	h.store.agentWrites(&capsule.Checkpoint{Focus: str("agent's focus"),
		WorkingState: &capsule.WorkingState{NextAction: str("agent's next"), LastResult: str("agent's result")}})
	h.activity()
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: fileAt,
		Focus: str("file focus"), NextAction: str("file next"), LastResult: str("file result"), WaitingFor: str("file blocker")}})
	h.advance(2 * time.Minute)
	for _, c := range h.store.checkpoints() {
		if c.CP.Focus != nil || c.CP.WorkingState != nil {
			t.Fatalf("older file content overwrote the agent's newer write: %+v", c.CP)
		}
	}
	st := h.store.Resume()
	if st.Focus != "agent's focus" || st.WorkingState.NextAction != "agent's next" {
		t.Fatalf("state: %+v", st)
	}

	// The file changes again, after the agent's write: applied.
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: h.clk.Now(),
		Focus: str("file focus 2"), NextAction: str("file next 2")}})
	h.advance(2 * time.Minute)
	st = h.store.Resume()
	if st.Focus != "file focus 2" || st.WorkingState.NextAction != "file next 2" || st.WorkingState.LastResult != "agent's result" {
		t.Fatalf("newer file content not applied: focus %q ws %+v", st.Focus, st.WorkingState)
	}

	// The policy's own write does not count as the agent's: a file change
	// made before it (but after the agent's write) still applies.
	fileAt = h.clk.Now().Add(-30 * time.Second)
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: fileAt, Focus: str("file focus 3")}})
	h.advance(2 * time.Minute)
	if st = h.store.Resume(); st.Focus != "file focus 3" {
		t.Fatalf("focus %q", st.Focus)
	}

	// Same value as stored: not re-sent.
	n := len(h.store.checkpoints())
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), Focus: str("file focus 3")}})
	h.advance(2 * time.Minute)
	if len(h.store.checkpoints()) != n {
		t.Errorf("unchanged derived content re-sent")
	}

	// A capsule the agent stored itself after the file changed stays.
	fileAt = h.clk.Now()
	h.advance(time.Minute)
	h.store.agentPutsCapsule(capsule.Capsule{Version: "1", Goal: "agent's capsule"})
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: fileAt, Capsule: &capsule.Capsule{Version: "1", Goal: "file capsule"}}})
	h.advance(2 * time.Minute)
	if c := h.store.Capsule(); c.Capsule.Goal != "agent's capsule" {
		t.Errorf("older file capsule overwrote the agent's: %+v", c)
	}
	// A newer one is stored, unsealed, as derived.
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), Capsule: &capsule.Capsule{Version: "1", Goal: "file capsule 2"}}})
	acts := h.advance(2 * time.Minute)
	if c := h.store.Capsule(); c.Capsule.Goal != "file capsule 2" || c.Sealed || len(acts) != 1 || acts[0].Trigger != TriggerDerived {
		t.Errorf("newer file capsule: %+v %+v", c, acts)
	}
}

func TestPublicStatusCarriesNoPrivateText(t *testing.T) {
	const private = "PRIVATE-migrate-the-billing-db"
	h := newHarness(t, DefaultConfig(), func(s *fakeStore) {
		s.applyLocked(&capsule.Checkpoint{Focus: str(private + " focus"),
			WorkingState: &capsule.WorkingState{NextAction: str(private + " next"), LastResult: str(private + " result"),
				WaitingFor: capsule.NullableString{Set: true, Valid: true, Value: private + " waiting"}}}, capsule.OriginExplicit)
		s.cps = nil
	})
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: t0.Add(time.Second), Focus: str(private + " derived focus"), NextAction: str(private + " derived next")}})
	h.activity()
	h.advance(time.Minute)
	h.usage(0.6)
	h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre"})
	h.advance(3 * time.Hour)
	h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "end"})
	cps := h.store.checkpoints()
	if len(cps) < 5 {
		t.Fatalf("only %d checkpoints", len(cps))
	}
	for _, c := range cps {
		if ps := c.CP.PublicStatus; ps != nil {
			b, _ := json.Marshal(ps)
			if strings.Contains(string(b), "PRIVATE") {
				t.Errorf("private text in the public status: %s", b)
			}
		}
	}
}

func TestAgentsOwnPublicStatus(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(time.Minute)
	// The agent says what it is doing; the policy's view has not changed
	// since: the agent's status stands, and is not overwritten.
	until := json.RawMessage(`"2026-08-08T12:00:00Z"`)
	mine := capsule.PublicStatus{Phase: PhaseActing, NextAction: "fixing the parser", Reason: "release blocker",
		Tool: "go test", Route: "/office/{agent}", Until: until}
	h.store.agentWrites(&capsule.Checkpoint{PublicStatus: &mine})
	h.activity()
	if acts := h.advance(time.Minute); len(acts) != 0 {
		t.Fatalf("the agent's newer status was overwritten: %+v", acts)
	}
	h.usage(0.6) // a re-send keeps the agent's status whole
	cps := h.store.checkpoints()
	if ps := cps[len(cps)-1].CP.PublicStatus; !equalStatus(ps, &mine) {
		t.Fatalf("threshold re-send: %+v", ps)
	}
	// Idle: the phase changes; the agent's tool and route stay, its
	// acting-phase next_action, reason and until do not describe waiting.
	h.advance(10 * time.Minute)
	cps = h.store.checkpoints()
	got := cps[len(cps)-1].CP.PublicStatus
	want := capsule.PublicStatus{Phase: PhaseWaiting, NextAction: TextWaiting, Tool: "go test", Route: "/office/{agent}"}
	if !equalStatus(got, &want) {
		t.Fatalf("idle status %+v, want %+v", got, want)
	}
	// Activity again: acting with the agent's own acting text, and its
	// until is dropped once passed.
	h.clk.Set(time.Date(2026, 8, 8, 12, 30, 0, 0, time.UTC))
	h.activity()
	h.advance(time.Minute)
	cps = h.store.checkpoints()
	got = cps[len(cps)-1].CP.PublicStatus
	want = capsule.PublicStatus{Phase: PhaseActing, NextAction: "fixing the parser", Reason: "release blocker", Tool: "go test", Route: "/office/{agent}"}
	if !equalStatus(got, &want) {
		t.Fatalf("acting again: %+v, want %+v", got, want)
	}
}

func TestStoppedResidencySendsNothing(t *testing.T) {
	h := newHarness(t, DefaultConfig(), func(s *fakeStore) {
		s.st.Stopped = &capsule.StopRecord{Reason: "paused by the operator", At: t0}
	})
	h.activity()
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: t0, Focus: str("x y z")}})
	h.usage(0.9)
	h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre"})
	h.advance(5 * time.Hour)
	h.signal(capsule.Signal{Kind: capsule.SignalSession, Event: "end"})
	if n := h.store.writeCalls(); n != 0 || h.seals != 0 || len(h.acts) != 0 {
		t.Fatalf("stopped residency: %d writes, %d seals, %+v", n, h.seals, h.acts)
	}
	if at, ok := h.p.NextDeadline(); ok {
		t.Errorf("stopped and ended, wants a tick at %v", at)
	}

	// Resumed: the pending content goes with the next checkpoint.
	h.store.set(func(st *capsule.Resume) { st.Stopped = nil })
	h.activity()
	h.advance(time.Minute)
	cps := h.store.checkpoints()
	if len(cps) != 1 || cps[0].CP.Focus == nil {
		t.Errorf("after resume: %+v", cps)
	}
}

// countingHandler counts records at Warn and above.
type countingHandler struct{ warns atomic.Int32 }

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warns.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func TestStoreErrorsRecordedAndLoggedOnce(t *testing.T) {
	clk := &fakeClock{t: t0}
	store := newFakeStore(t, clk)
	logs := &countingHandler{}
	p := New("builder", DefaultConfig(), store, nil, slog.New(logs), clk.Now)
	full := capsule.Refuse(capsule.CodeSpoolFull, "", "full")
	store.err = full
	ctx := context.Background()
	p.Handle(ctx, Input{Kind: KindActivity})
	var errs []error
	for i := range 5 {
		f := 0.3
		p.Handle(ctx, Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}})
		f = 0.6 + float64(i)/100
		for _, a := range p.Handle(ctx, Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}}) {
			errs = append(errs, a.Err)
		}
	}
	if len(errs) != 5 {
		t.Fatalf("%d actions", len(errs))
	}
	for _, err := range errs {
		if !errors.Is(err, full) {
			t.Errorf("action error %v", err)
		}
	}
	if n := logs.warns.Load(); n != 1 {
		t.Errorf("%d warnings for one kind of error, want 1", n)
	}
	// A stopped residency answers 409: the policy stops sending.
	store.err = capsule.Refuse(capsule.CodeResidencyStopped, "", "stopped")
	f := 0.3
	p.Handle(ctx, Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}})
	f = 0.9
	acts := p.Handle(ctx, Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}})
	if len(acts) != 1 || acts[0].Err == nil || logs.warns.Load() != 2 {
		t.Errorf("409: %+v, %d warnings", acts, logs.warns.Load())
	}
}

// TestStorm: each simulated hour brings 10,000 activity inputs, 1,000
// context signals oscillating around a threshold, 100 handoff changes and
// 15 compactions; the automatic writes stay within the cap in any sliding
// hour, and within what the rules allow.
func TestStorm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
	}{
		{"jitter", 0.49, 0.51}, // within the hysteresis: fires once at most
		{"swing", 0.2, 0.9},    // re-arms every time: only the cap holds it
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, DefaultConfig())
			type ev struct {
				at time.Time
				in Input
			}
			var evs []ev
			const hours = 2
			for hr := range hours {
				start := t0.Add(time.Duration(hr) * time.Hour)
				for i := range 10000 {
					evs = append(evs, ev{start.Add(time.Duration(i) * time.Hour / 10000), Input{Kind: KindActivity}})
				}
				for i := range 1000 {
					f := tc.lo
					if i%2 == 1 {
						f = tc.hi
					}
					evs = append(evs, ev{start.Add(time.Duration(i)*time.Hour/1000 + time.Millisecond), Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f}}})
				}
				for i := range 100 {
					at := start.Add(time.Duration(i)*time.Hour/100 + 2*time.Millisecond)
					evs = append(evs, ev{at, Input{Kind: KindDerived, Derived: &Derived{ChangedAt: at, NextAction: str(fmt.Sprintf("step %d of the plan", hr*100+i))}}})
				}
				for i := range 15 {
					evs = append(evs, ev{start.Add(time.Duration(i)*time.Hour/15 + 3*time.Millisecond), Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre"}}})
				}
			}
			slices.SortStableFunc(evs, func(a, b ev) int { return a.at.Compare(b.at) })
			for _, e := range evs {
				h.advanceTo(e.at)
				h.handle(e.in)
			}
			h.advance(time.Hour)

			var writes []time.Time
			for _, c := range h.store.checkpoints() {
				writes = append(writes, c.At)
			}
			for _, c := range h.store.capsules() {
				writes = append(writes, c.At)
			}
			slices.SortFunc(writes, time.Time.Compare)
			cap := DefaultConfig().MaxPerHour()
			for i := range writes { // any sliding hour
				j := i
				for j < len(writes) && writes[j].Before(writes[i].Add(time.Hour)) {
					j++
				}
				if j-i > cap {
					t.Fatalf("%d automatic writes in the hour from %v, cap %d", j-i, writes[i].Sub(t0), cap)
				}
			}
			sent := map[string]int{}
			var quiet []time.Time
			for _, a := range h.acts {
				if a.Err != nil {
					if !errors.Is(a.Err, ErrRateLimited) {
						t.Errorf("unexpected error %v", a.Err)
					}
					continue
				}
				sent[a.Trigger]++
				if a.Trigger == TriggerQuiet {
					quiet = append(quiet, h.store.clkAt(a.Seq))
				}
			}
			for i := 1; i < len(quiet); i++ {
				if d := quiet[i].Sub(quiet[i-1]); d < time.Minute {
					t.Errorf("quiet checkpoints %v apart, under MinInterval", d)
				}
			}
			if n := sent[TriggerQuiet] + sent[TriggerThreshold] + sent[TriggerPreCompaction] + sent[TriggerIdle] + sent[TriggerRefresh] + sent[TriggerDerived]; n != len(writes) {
				t.Errorf("%d writes, %d reported", len(writes), n)
			}
			// The rules: one quiet checkpoint per MinInterval at most; a
			// checkpoint and a seal per compaction; thresholds once per
			// re-arm; idle once after the last activity.
			// (A compaction whose seal the cap held back is retried:
			// up to one more checkpoint.)
			if sent[TriggerQuiet] > (hours+1)*60 || sent[TriggerPreCompaction] > 3*15*hours || sent[TriggerIdle] > 1 {
				t.Errorf("more than the rules allow: %v", sent)
			}
			t.Logf("%d writes over %dh: %v; %d actions", len(writes), hours+1, sent, len(h.acts))
			switch tc.name {
			case "jitter":
				if sent[TriggerThreshold] > 1 {
					t.Errorf("jitter around a threshold fired it %d times, want at most 1", sent[TriggerThreshold])
				}
				if sent[TriggerQuiet] == 0 || sent[TriggerPreCompaction] == 0 {
					t.Errorf("the storm starved a trigger: %v", sent)
				}
			case "swing":
				if len(writes) < cap {
					t.Errorf("only %d writes: the swing should reach the cap", len(writes))
				}
			}
			// Every handoff change made it into the state in the end.
			if st := h.store.Resume(); st.WorkingState == nil || st.WorkingState.NextAction != "step 199 of the plan" {
				t.Errorf("last handoff change lost: %+v", st.WorkingState)
			}
		})
	}
}

// clkAt is when the write with seq was made.
func (s *fakeStore) clkAt(seq uint64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cps {
		if c.Seq == seq {
			return c.At
		}
	}
	for _, c := range s.caps {
		if c.Seq == seq {
			return c.At
		}
	}
	return time.Time{}
}

func TestRateCapRetriesWhenASlotFrees(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinInterval = time.Hour // cap = 1 + 10 = 11
	h := newHarness(t, cfg)
	if cfg.MaxPerHour() != 11 {
		t.Fatal(cfg.MaxPerHour())
	}
	h.activity()
	for i := range 20 {
		h.clk.Advance(time.Second)
		h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), NextAction: str(fmt.Sprintf("step %d", i))}})
		h.usage(0.3)
		h.usage(0.6 + float64(i)/1000)
	}
	var limited int
	for _, a := range h.acts {
		if errors.Is(a.Err, ErrRateLimited) {
			limited++
		}
	}
	if n := len(h.store.checkpoints()); n != 11-sealReserve || limited == 0 {
		t.Fatalf("%d checkpoints, %d held back", n, limited)
	}
	// The reserve: a compaction still seals.
	acts := h.signal(capsule.Signal{Kind: capsule.SignalCompaction, Phase: "pre"})
	if len(acts) != 2 || acts[0].Err != nil || acts[1].Err != nil || !acts[1].Sealed {
		t.Fatalf("compaction under the cap: %+v", acts)
	}
	// Derived content held back goes once the oldest write leaves the hour.
	h.handle(Input{Kind: KindDerived, Derived: &Derived{ChangedAt: h.clk.Now(), Focus: str("held back focus")}})
	h.usage(0.3)
	h.usage(0.9)
	// 9 writes in the hour, 7 allowed outside the reserve: the retry is due
	// when the third leaves the hour.
	third := h.store.checkpoints()[2].At
	h.advanceTo(third.Add(time.Hour - time.Second))
	if st := h.store.Resume(); st.Focus != "" {
		t.Fatalf("sent over the cap: %q", st.Focus)
	}
	h.advanceTo(third.Add(time.Hour))
	if st := h.store.Resume(); st.Focus != "held back focus" {
		t.Errorf("held-back content not sent when a slot freed: %q", st.Focus)
	}
}

func TestRunTicksAndExitsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := DefaultConfig()
	cfg.Quiet = 10 * time.Millisecond
	clk := &fakeClock{t: time.Now()}
	store := newFakeStore(t, clk)
	// The policy's clock is real here; the fake store stamps its own.
	p := New("builder", cfg, store, nil, nil, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan Input)
	done := make(chan struct{})
	go func() { p.Run(ctx, in); close(done) }()
	in <- Input{Kind: KindActivity}
	deadline := time.After(60 * time.Second)
	for len(store.checkpoints()) == 0 {
		select {
		case <-deadline:
			t.Fatal("Run never ticked the quiet period")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not exit on cancel")
	}

	// A closed input channel ends it too.
	in2 := make(chan Input)
	done2 := make(chan struct{})
	go func() { p.Run(context.Background(), in2); close(done2) }()
	close(in2)
	select {
	case <-done2:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not exit on a closed input")
	}
}

// TestWithResidency runs the policy against the real residency store: its
// automatic writes are accepted and read back.
func TestWithResidency(t *testing.T) {
	now := time.Now()
	clk := &fakeClock{t: now}
	s, err := residency.Open(residency.Options{Agent: "builder", Dir: t.TempDir(), Upstreams: []string{"local"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seal := func(st capsule.Resume, draft *capsule.CapsuleRecord, now time.Time) (*capsule.Capsule, error) {
		return &capsule.Capsule{Version: "1", Goal: st.Focus}, nil
	}
	p := New("builder", DefaultConfig(), s, seal, nil, clk.Now)
	ctx := context.Background()
	p.Handle(ctx, Input{Kind: KindActivity})
	p.Handle(ctx, Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: now, Focus: str("ship the parser"), NextAction: str("run the tests")}})
	clk.Set(now.Add(time.Minute))
	acts := p.Handle(ctx, Input{Kind: KindTick})
	if len(acts) != 1 || acts[0].Err != nil {
		t.Fatalf("quiet: %+v", acts)
	}
	acts = p.Handle(ctx, Input{Kind: KindSignal, Signal: &capsule.Signal{Kind: capsule.SignalSession, Event: "end"}})
	if len(acts) != 2 || acts[0].Err != nil || acts[1].Err != nil {
		t.Fatalf("session end: %+v", acts)
	}
	st := s.Resume()
	if st.Focus != "ship the parser" || st.WorkingState == nil || st.WorkingState.NextAction != "run the tests" ||
		st.WorkingState.Origin != capsule.OriginAutomatic || st.PublicStatus == nil || st.PublicStatus.Phase != PhaseResting ||
		st.Capsule == nil || !st.Capsule.Sealed || st.Capsule.Capsule.Goal != "ship the parser" {
		t.Fatalf("resume after the policy: %+v", st)
	}
	// Stopped: nothing more.
	if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Stop: &capsule.Stop{Reason: "operator"}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	seq := s.Resume().Seq
	p.Handle(ctx, Input{Kind: KindActivity})
	clk.Set(now.Add(3 * time.Minute))
	if acts := p.Handle(ctx, Input{Kind: KindTick}); len(acts) != 0 || s.Resume().Seq != seq {
		t.Errorf("wrote to a stopped residency: %+v", acts)
	}
}

// An agent's write that lands between the policy's read of the state and
// its checkpoint is never overwritten by what the policy derived from the
// older read: the checkpoint is conditional, and the policy decides afresh.
func TestDerivedLosesARaceWithTheAgent(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.activity()
	h.advance(time.Minute)
	// A handoff file says what the agent is doing...
	h.handle(Input{Kind: KindDerived, Derived: &Derived{Source: "HANDOFF.md", ChangedAt: h.clk.Now(),
		Focus: str("file focus"), NextAction: str("file next")}})
	h.advance(time.Second)
	// ...and the agent saves its own focus just as the policy writes.
	h.store.beforeWrite = func() {
		h.store.agentWrites(&capsule.Checkpoint{Focus: str("agent's focus"),
			WorkingState: &capsule.WorkingState{NextAction: str("agent's next")}})
	}
	h.advance(3 * time.Minute)
	if h.store.beforeWrite != nil {
		t.Fatal("the policy never wrote: the race was not exercised")
	}
	st := h.store.Resume()
	if st.Focus != "agent's focus" || st.WorkingState == nil || st.WorkingState.NextAction != "agent's next" {
		t.Fatalf("the policy overwrote the agent's newer write: focus %q ws %+v", st.Focus, st.WorkingState)
	}
	for _, c := range h.store.checkpoints() {
		if c.CP.Focus != nil && *c.CP.Focus == "file focus" {
			t.Fatalf("the stale derived focus was stored: %+v", c)
		}
	}
}
