package daemon

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/upstream/local"
)

const evidence = "post:6f1c2c1e-9a1b-4c6d-8e2f-0123456789ab"

func TestCheckpointRoundTripAndResume(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	ans := td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{
		"focus":         "ship the parser fix",
		"working_state": map[string]any{"next_action": "run the fuzzers", "last_result": "tests green", "result_ref": nil, "waiting_for": "review"},
		"decide":        map[string]any{"chosen": "retry with backoff", "because": "the upstream drops bursts over sixty a minute", "passed_over": "a bigger burst"},
		"public_status": map[string]any{"phase": "acting", "next_action": "fixing the parser", "route": "/agents/{id}"},
	})
	if ans["seq"].(float64) != 1 {
		t.Fatalf("seq = %v", ans["seq"])
	}
	r := td.resume("")
	if r["focus"] != "ship the parser fix" {
		t.Fatalf("focus = %v", r["focus"])
	}
	ws := r["working_state"].(map[string]any)
	if ws["next_action"] != "run the fuzzers" || ws["waiting_for"] != "review" || ws["result_ref"] != nil || ws["updated_at"] == nil {
		t.Fatalf("working_state = %v", ws)
	}
	if d := r["decisions"].([]any); len(d) != 1 {
		t.Fatalf("decisions = %v", d)
	}
	if ps := r["public_status"].(map[string]any); ps["phase"] != "acting" || ps["updated_at"] == nil {
		t.Fatalf("public_status = %v", ps)
	}
	for _, k := range []string{"agent", "commitments", "capsule", "receipts", "since_last_visit", "context", "upstreams", "degraded", "directions"} {
		if _, ok := r[k]; !ok {
			t.Fatalf("resume lacks %q: %v", k, r)
		}
	}
	// A partial working state keeps the other fields; null clears.
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"working_state": map[string]any{"waiting_for": nil}})
	ws = td.resume("?peek=1")["working_state"].(map[string]any)
	if ws["next_action"] != "run the fuzzers" || ws["waiting_for"] != nil {
		t.Fatalf("merge: %v", ws)
	}
}

func TestSinceLastVisitResetsOnResume(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "one"})
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "context", "used_fraction": 0.5})
	slv := td.resume("?peek=1")["since_last_visit"].(map[string]any)
	if slv["writes"].(float64) != 1 || len(slv["signals"].([]any)) != 1 {
		t.Fatalf("before visit: %v", slv)
	}
	// Peeking again shows the same; the agent's own read resets.
	if td.resume("?peek=1")["since_last_visit"].(map[string]any)["writes"].(float64) != 1 {
		t.Fatal("peek reset the accumulators")
	}
	td.resume("")
	// The reset is lazy (it commits on its own within lazyDelay, or with
	// the next write): wait for it, generously.
	deadline := time.Now().Add(30 * time.Second)
	for {
		slv = td.resume("?peek=1")["since_last_visit"].(map[string]any)
		if slv["writes"].(float64) == 0 && len(slv["signals"].([]any)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("since_last_visit not reset: %v", slv)
		}
		time.Sleep(10 * time.Millisecond)
	}
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "two"})
	if td.resume("?peek=1")["since_last_visit"].(map[string]any)["writes"].(float64) != 1 {
		t.Fatal("a write after the visit was lost")
	}
}

func TestStopAndResumeResidency(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"stop": map[string]any{"reason": "operator asked to stop"}, "focus": "ignored"})
	r := td.resume("?peek=1")
	if r["stopped"] == nil || r["focus"] != "" {
		t.Fatalf("stop did not record or did not ignore other fields: %v", r)
	}
	td.expectError("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "x y z"}, http.StatusConflict, capsule.CodeResidencyStopped)
	// A refused write changes nothing.
	if td.resume("?peek=1")["seq"].(float64) != 1 {
		t.Fatal("refused write moved seq")
	}
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"resume_residency": true, "focus": "back at it"})
	r = td.resume("?peek=1")
	if r["stopped"] != nil || r["focus"] != "back at it" {
		t.Fatalf("resume_residency: %v", r)
	}
}

func TestCommitmentsLifecycleAndLimits(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	var open []map[string]any
	for i := 0; i < guard.MaxOpenCommitments; i++ {
		open = append(open, map[string]any{"title": fmt.Sprintf("task %d", i)})
	}
	// 11 then 1: at the limit is fine.
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{"open": open[:11]}})
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{"open": open[11:]}})
	// 13th: over.
	td.expectError("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{"open": []any{map[string]any{"title": "one more"}}}},
		http.StatusBadRequest, capsule.CodeTooManyOpenLoops)
	cs := td.resume("?peek=1")["commitments"].([]any)
	if len(cs) != 12 {
		t.Fatalf("%d commitments", len(cs))
	}
	first := cs[0].(map[string]any)["id"].(string)
	second := cs[1].(map[string]any)["id"].(string)
	// Close one and open one in the same write: allowed (close first).
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{
		"close": []any{map[string]any{"id": first, "evidence": evidence}},
		"open":  []any{map[string]any{"title": "replacement"}}}})
	td.expectError("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{
		"close": []any{map[string]any{"id": first, "evidence": evidence}}}}, http.StatusBadRequest, capsule.CodeUnknownCommitment)
	td.expectError("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{
		"close": []any{map[string]any{"id": second}}}}, http.StatusBadRequest, capsule.CodeEvidenceRequired)
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"commitments": map[string]any{
		"drop": []any{map[string]any{"id": second, "reason": "superseded by the v2 plan"}}}})
	var closed, dropped map[string]any
	for _, c := range td.resume("?peek=1")["commitments"].([]any) {
		m := c.(map[string]any)
		switch m["id"] {
		case first:
			closed = m
		case second:
			dropped = m
		}
	}
	if closed["status"] != "closed" || closed["evidence"] != evidence || len(closed["history"].([]any)) != 2 {
		t.Fatalf("closed: %v", closed)
	}
	if dropped["status"] != "dropped" || dropped["reason"] != "superseded by the v2 plan" {
		t.Fatalf("dropped: %v", dropped)
	}
}

func TestRequestErrors(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	cp := "/v1/continuity/checkpoint"
	td.expectError("POST", cp, "{not json", 400, capsule.CodeInvalidJSON)
	td.expectError("POST", cp, `{"focus":"a"}{"focus":"b"}`, 400, capsule.CodeInvalidJSON)
	td.expectError("POST", cp, []byte("{\"focus\":\"\xff\xfe\"}"), 400, capsule.CodeInvalidUTF8)
	m := td.expectError("POST", cp, `{"focus":"a","colour":"blue"}`, 400, capsule.CodeUnknownField)
	if !strings.Contains(fmt.Sprint(m), "colour") {
		t.Fatalf("unknown field not named: %v", m)
	}
	td.expectError("POST", cp, `{"focus":7}`, 400, capsule.CodeInvalidField)
	td.expectError("POST", cp, `{}`, 400, capsule.CodeEmptyCheckpoint)
	td.expectError("POST", cp, map[string]any{"decide": map[string]any{"chosen": "x", "because": "too short"}}, 400, capsule.CodeMotiveRequired)
	td.expectError("POST", cp, map[string]any{"public_status": map[string]any{"phase": "dancing", "next_action": "x"}}, 400, capsule.CodeInvalidPublicStatus)
	td.expectError("POST", cp, map[string]any{"working_state": map[string]any{"next_action": strings.Repeat("a", guard.MaxWorkingStateField+1)}}, 400, capsule.CodeInvalidWorkingState)
	m = td.expectError("POST", cp, map[string]any{"working_state": map[string]any{"last_result": "deployed with ghp_R7x9Qm2LkP4vT8nZ3wY6bJ1cF5hD0sA2eG7k"}}, 400, capsule.CodeSecretDetected)
	if strings.Contains(fmt.Sprint(m), "ghp_") || errField(m) != "working_state.last_result" {
		t.Fatalf("secret refusal echoes the value or misses the field: %v", m)
	}
	td.expectError("GET", "/v1/continuity/wait?max_seconds=0", nil, 400, capsule.CodeInvalidQuery)
	td.expectError("GET", "/v1/continuity/wait?max_seconds=91", nil, 400, capsule.CodeInvalidQuery)
	td.expectError("GET", "/v1/continuity?agent=nobody", nil, 404, capsule.CodeUnknownAgent)
	td.expectError("DELETE", "/v1/capsule", nil, 405, capsule.CodeMethodNotAllowed)
	td.expectError("GET", "/v2/nothing", nil, 404, capsule.CodeNotFound)
	td.expectError("GET", "/v1/capsule", nil, 404, capsule.CodeNoCapsule)
	td.expectError("POST", "/v1/signals", map[string]any{"kind": "weather"}, 400, capsule.CodeInvalidSignal)
	td.expectError("PUT", "/v1/capsule", map[string]any{"version": "2"}, 400, capsule.CodeInvalidCapsule)
	// Nothing above changed anything.
	if r := td.resume("?peek=1"); r["seq"].(float64) != 0 {
		t.Fatalf("refused writes changed state: seq %v", r["seq"])
	}
}

func TestBodyLimitBoundary(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	// A valid capsule body padded with spaces to an exact size.
	pad := func(n int) string {
		base := `{"version":"1","goal":"the limit"}`
		return base + strings.Repeat(" ", n-len(base))
	}
	for _, tc := range []struct {
		size   int
		status int
	}{{guard.MaxBodyBytes - 1, 200}, {guard.MaxBodyBytes, 200}, {guard.MaxBodyBytes + 1, 413}} {
		got, m := td.do("PUT", "/v1/capsule", pad(tc.size))
		if got != tc.status {
			t.Fatalf("body of %d bytes: %d %v, want %d", tc.size, got, m, tc.status)
		}
		if tc.status == 413 && errCode(m) != capsule.CodeBodyTooLarge {
			t.Fatalf("413 code %v", m)
		}
	}
}

func TestAgentSelection(t *testing.T) {
	td := startDaemon(t, testConfig(t, "alpha", "beta"))
	td.expectError("GET", "/v1/continuity", nil, 400, capsule.CodeAgentRequired)
	td.expectOK("POST", "/v1/continuity/checkpoint?agent=alpha", map[string]any{"focus": "alpha work"})
	td.expectOK("POST", "/v1/continuity/checkpoint?agent=beta", map[string]any{"focus": "beta work"})
	if f := td.resume("?agent=alpha&peek=1")["focus"]; f != "alpha work" {
		t.Fatalf("alpha focus %v", f)
	}
	if f := td.resume("?agent=beta&peek=1")["focus"]; f != "beta work" {
		t.Fatalf("beta focus %v", f)
	}
	for _, a := range []string{"alpha", "beta"} {
		if _, err := os.Stat(filepath.Join(td.cfg.AgentDir(a), "residency.db")); err != nil {
			t.Fatalf("agent %s has no state dir of its own: %v", a, err)
		}
	}
	st := td.expectOK("GET", "/v1/status", nil)
	if len(st["agents"].([]any)) != 2 {
		t.Fatalf("status agents: %v", st)
	}
}

func TestCapsulePutGetSeal(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	td.expectOK("PUT", "/v1/capsule", map[string]any{"version": "1", "goal": "draft goal", "do_not": "Do not delete the shim", "refuted": "batching fails: not idempotent", "ttl_days": 14})
	got := td.expectOK("GET", "/v1/capsule", nil)
	if got["capsule"].(map[string]any)["do_not"] != "Do not delete the shim" || got["sealed"] != false {
		t.Fatalf("get: %v", got)
	}
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "migrate billing", "working_state": map[string]any{"next_action": "swap callsites", "last_result": "adapters written", "waiting_for": "STRIPE key in staging"}})
	sealed := td.expectOK("POST", "/v1/capsule/seal", map[string]any{"handoff_to": "next-session"})
	c := sealed["capsule"].(map[string]any)["capsule"].(map[string]any)
	want := map[string]any{"goal": "migrate billing", "next": "swap callsites", "done": "adapters written", "blockers": "STRIPE key in staging",
		"do_not": "Do not delete the shim", "refuted": "batching fails: not idempotent", "written_by": "builder", "handoff_to": "next-session", "version": "1", "ttl_days": float64(14)}
	for k, v := range want {
		if c[k] != v {
			t.Fatalf("sealed %s = %v, want %v (%v)", k, c[k], v, c)
		}
	}
	if sealed["capsule"].(map[string]any)["sealed"] != true {
		t.Fatal("not marked sealed")
	}
	td.expectError("POST", "/v1/capsule/seal", map[string]any{"handoff_to": strings.Repeat("x", capsule.CapsuleNameMax+1)}, 400, capsule.CodeInvalidCapsule)
	td.expectError("POST", "/v1/capsule/seal", map[string]any{"colour": "x"}, 400, capsule.CodeInvalidCapsule)
}

func TestWaitWokenBySignalAndTimesOut(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	type res struct {
		status int
		body   map[string]any
	}
	// The cursor of now: the waiter below sees the signal whether its
	// request parks before the signal lands or comes after it (the parked
	// wake-up itself is daemon/events' TestWaitWakesAllWaiters).
	now := td.expectOK("GET", "/v1/continuity/wait?max_seconds=1", nil)
	if now["woke"] != "timeout" {
		t.Fatalf("a wait with nothing happening: %v", now)
	}
	ch := make(chan res, 1)
	go func() {
		s, b := td.do("GET", fmt.Sprintf("/v1/continuity/wait?max_seconds=60&after=%v", now["cursor"]), nil)
		ch <- res{s, b}
	}()
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"})
	select {
	case r := <-ch:
		if r.status != 200 || r.body["woke"] != "event" {
			t.Fatalf("wait: %d %v", r.status, r.body)
		}
		evs := r.body["events"].([]any)
		if evs[0].(map[string]any)["kind"] != "signal" {
			t.Fatalf("events: %v", evs)
		}
		// The cursor returns what happened since, at once.
		td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "after the wait"})
		again := td.expectOK("GET", fmt.Sprintf("/v1/continuity/wait?max_seconds=1&after=%v", r.body["cursor"]), nil)
		if again["woke"] != "event" || again["events"].([]any)[0].(map[string]any)["kind"] != "checkpoint" {
			t.Fatalf("after cursor: %v", again)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wait was not woken by the signal")
	}
	if r := td.expectOK("GET", "/v1/continuity/wait?max_seconds=1", nil); r["woke"] != "timeout" {
		t.Fatalf("timeout: %v", r)
	}
}

func TestConcurrentWritersAllLandInOrder(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	const writers, each = 16, 25
	var wg sync.WaitGroup
	seqs := make(chan float64, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body := map[string]any{"focus": fmt.Sprintf("writer %d write %d", w, i)}
				if i%5 == 0 { // refused writes mixed in must not disturb the batch
					body = map[string]any{"decide": map[string]any{"chosen": "x", "because": "short"}}
					if s, _ := td.do("POST", "/v1/continuity/checkpoint", body); s != 400 {
						t.Errorf("bad write got %d", s)
					}
					continue
				}
				s, m := td.do("POST", "/v1/continuity/checkpoint", body)
				if s != 200 {
					t.Errorf("write: %d %v", s, m)
					return
				}
				seqs <- m["seq"].(float64)
			}
		}()
	}
	wg.Wait()
	close(seqs)
	seen := map[float64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("seq %v given twice", s)
		}
		seen[s] = true
	}
	want := writers * each * 4 / 5
	if len(seen) != want {
		t.Fatalf("%d accepted, want %d", len(seen), want)
	}
	// Every accepted write reaches the local archive, in order.
	waitFor(t, 60*time.Second, func() bool {
		ws, _ := local.ReadAll(td.cfg.AgentDir("builder"))
		return len(ws) == want
	})
	ws, _ := local.ReadAll(td.cfg.AgentDir("builder"))
	for i, w := range ws {
		if w.Seq != uint64(i+1) || w.IdempotencyKey == "" {
			t.Fatalf("archive[%d] = seq %d key %q", i, w.Seq, w.IdempotencyKey)
		}
	}
}

func TestSecondDaemonOnSameSocketRefused(t *testing.T) {
	cfg := testConfig(t)
	startDaemon(t, cfg)
	cfg2 := *cfg
	cfg2.Daemon.StateDir = filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "other")
	d2, err := New(&cfg2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = d2.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Fatalf("second daemon: %v", err)
	}
}

func TestSameStateDirRefused(t *testing.T) {
	cfg := testConfig(t)
	startDaemon(t, cfg)
	cfg2 := *cfg
	cfg2.Daemon.Socket = filepath.Join(filepath.Dir(cfg.Daemon.Socket), "other.sock")
	d2, _ := New(&cfg2, Options{})
	start := time.Now()
	err := d2.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "another continuityd is running on state directory") ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), cfg.Daemon.Socket) {
		t.Fatalf("second daemon on the same state: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("took too long to give up")
	}
}

func TestUnwritableStateDirIsAClearError(t *testing.T) {
	// A path under a regular file cannot be created, even by root.
	cfg := testConfig(t)
	blocker := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "file")
	os.WriteFile(blocker, []byte("x"), 0o600)
	cfg.Daemon.StateDir = filepath.Join(blocker, "state")
	d, _ := New(cfg, Options{})
	err := d.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("got %v", err)
	}
}

func TestLoopbackListenerNeedsTokenAndSameOrigin(t *testing.T) {
	cfg := testConfig(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg.Daemon.Listen = addr
	startDaemon(t, cfg)
	tok, err := os.ReadFile(filepath.Join(cfg.Daemon.StateDir, "api.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(cfg.Daemon.StateDir, "api.token")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", fi.Mode().Perm())
	}
	get := func(auth, origin string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	bearer := "Bearer " + strings.TrimSpace(string(tok))
	if s := get("", ""); s != 401 {
		t.Fatalf("no token: %d", s)
	}
	if s := get("Bearer wrong", ""); s != 401 {
		t.Fatalf("wrong token: %d", s)
	}
	if s := get(bearer, ""); s != 200 {
		t.Fatalf("token: %d", s)
	}
	if s := get(bearer, "https://evil.example"); s != 403 {
		t.Fatalf("cross origin: %d", s)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestSyncCheckpointReportsUpstreams(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	m := td.expectOK("POST", "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "synced"})
	s := m["sync"].([]any)
	if len(s) != 1 || s[0].(map[string]any)["name"] != "local" || s[0].(map[string]any)["delivered"] != true {
		t.Fatalf("sync: %v", s)
	}
	ws, _ := local.ReadAll(td.cfg.AgentDir("builder"))
	if len(ws) != 1 || *ws[0].Checkpoint.Focus != "synced" {
		t.Fatalf("archive after sync: %+v", ws)
	}
	td.expectError("POST", "/v1/continuity/checkpoint?sync=maybe", map[string]any{"focus": "x"}, 400, capsule.CodeInvalidQuery)
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSpoolFullRefusesExplicitWrites(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outbox.MaxPending = 3
	// An upstream that never takes anything keeps the log full: the local
	// archive cannot write into a directory that is a file.
	td := startDaemon(t, cfg)
	os.RemoveAll(filepath.Join(cfg.AgentDir("builder"), local.ArchiveDir))
	os.WriteFile(filepath.Join(cfg.AgentDir("builder"), local.ArchiveDir), []byte("not a directory"), 0o600)
	for i := 0; i < 3; i++ {
		td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": fmt.Sprint("write ", i)})
	}
	m := td.expectError("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "one too many"}, http.StatusInsufficientStorage, capsule.CodeSpoolFull)
	if !strings.Contains(m["error"].(map[string]any)["message"].(string), "nothing was saved") {
		t.Fatalf("message: %v", m)
	}
	td.expectError("PUT", "/v1/capsule", map[string]any{"version": "1"}, http.StatusInsufficientStorage, capsule.CodeSpoolFull)
	var up map[string]any
	waitFor(t, 60*time.Second, func() bool {
		up = td.resume("?peek=1")["upstreams"].([]any)[0].(map[string]any)
		return up["state"] == "retrying"
	})
	if up["pending"].(float64) != 3 || up["last_error"] == nil {
		t.Fatalf("upstream state while failing: %v", up)
	}
	// Once the upstream works again the backlog drains and writes are taken.
	os.Remove(filepath.Join(cfg.AgentDir("builder"), local.ArchiveDir))
	waitFor(t, 60*time.Second, func() bool {
		s, _ := td.do("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "after the drain"})
		return s == 200
	})
}

func TestDeadLetterAPI(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	m := td.expectOK("GET", "/v1/deadletter", nil)
	if len(m["entries"].([]any)) != 0 {
		t.Fatalf("entries: %v", m)
	}
	td.expectError("GET", "/v1/deadletter?upstream=nope", nil, 404, capsule.CodeNotFound)
	td.expectError("POST", "/v1/deadletter/retry", map[string]any{"upstream": "nope"}, 400, capsule.CodeInvalidField)
	td.expectError("POST", "/v1/deadletter/discard", map[string]any{"upstream": "local", "seq": 99}, 404, capsule.CodeNotFound)
	td.expectError("POST", "/v1/deadletter/retry", `{"upstream":"local","sequence":1}`, 400, capsule.CodeUnknownField)
	if r := td.expectOK("POST", "/v1/deadletter/retry", map[string]any{"upstream": "local"}); r["retried"].(float64) != 0 {
		t.Fatalf("retry all of nothing: %v", r)
	}
}
