package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/upstream/delxtest"
	"github.com/continuityd/continuityd/upstream/qday"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

// qdayRig is a daemon whose one agent ships to a fake Q-Day.
type qdayRig struct {
	*testDaemon
	fake *qdaytest.Server
}

func startQDayRig(t *testing.T, fo qdaytest.Options, tune func(*config.Config)) *qdayRig {
	t.Helper()
	fo.Token = "test-token-for-the-fake"
	fake := qdaytest.New(fo)
	t.Cleanup(fake.Close)
	t.Setenv("CD_TEST_QDAY_TOKEN", fo.Token)
	cfg := testConfig(t)
	cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_TEST_QDAY_TOKEN",
		Rate: 100, Burst: 10, Timeout: config.Duration{Duration: 700 * time.Millisecond}}}
	cfg.Agents[0].Upstreams = []string{"qday"}
	// Failure states last long enough to be seen.
	cfg.Outbox.MinBackoff = config.Duration{Duration: 300 * time.Millisecond}
	cfg.Outbox.MaxBackoff = config.Duration{Duration: 600 * time.Millisecond}
	if tune != nil {
		tune(cfg)
	}
	td := startDaemonWith(t, cfg, Options{Load: func() (*config.Config, error) { return cfg, nil }})
	return &qdayRig{testDaemon: td, fake: fake}
}

// upstream is the agent's qday delivery state as resume shows it.
func (r *qdayRig) upstream() map[string]any {
	return r.resume("?peek=1")["upstreams"].([]any)[0].(map[string]any)
}

func (r *qdayRig) waitState(t *testing.T, state string) map[string]any {
	t.Helper()
	var u map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		u = r.upstream()
		if u["state"] == state {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream state %v, want %s", u, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// write posts a checkpoint that cannot be coalesced and returns its key.
func (r *qdayRig) write(t *testing.T, what string) string {
	t.Helper()
	m := r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{
		"decide": map[string]any{"chosen": what, "because": "each write in the fault matrix is its own call"}})
	return r.keyOf(t, uint64(m["seq"].(float64)))
}

func (r *qdayRig) keyOf(t *testing.T, seq uint64) string {
	t.Helper()
	ws, err := r.d.snap().agents["builder"].Store().Pending("qday", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Seq == seq {
			return w.IdempotencyKey
		}
	}
	// Already delivered and pruned: the key is derived from the residency.
	return fmt.Sprintf("cd-%s-%d", r.d.snap().agents["builder"].Store().ResidencyID(), seq)
}

func (r *qdayRig) waitDelivered(t *testing.T, key string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, req := range r.fake.Accepted() {
			if req.IdempotencyKey == key {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("write %s never reached the fake; state %v", key, r.upstream())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFaultMatrix: each fault of the fake, the state the daemon shows, and
// the delivery that follows once the fault clears.
func TestFaultMatrix(t *testing.T) {
	r := startQDayRig(t, qdaytest.Options{}, nil)
	cp := qday.CheckpointPath
	httpDate := time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name   string
		faults []qdaytest.Fault
		state  string // shown while the fault lasts
		code   string // in last_error
	}{
		{"429 Retry-After seconds", []qdaytest.Fault{{Kind: qdaytest.Status429, RetryAfter: "1", Path: cp}}, "paused", "429"},
		{"429 Retry-After HTTP-date", []qdaytest.Fault{{Kind: qdaytest.Status429, RetryAfter: httpDate, Path: cp}}, "paused", "429"},
		{"429 without Retry-After", []qdaytest.Fault{{Kind: qdaytest.Status429, NoRetryAfter: true, Path: cp}}, "paused", "429"},
		// Transient faults come three in a row: full jitter may draw a wait
		// of almost nothing, and the state must stay long enough to be seen.
		{"500", times(3, qdaytest.Fault{Kind: qdaytest.Status500, Path: cp}), "retrying", "500"},
		{"502", times(3, qdaytest.Fault{Kind: qdaytest.Status502, Path: cp}), "retrying", "502"},
		{"503", times(3, qdaytest.Fault{Kind: qdaytest.Status503, Path: cp}), "retrying", "503"},
		{"timeout", []qdaytest.Fault{{Kind: qdaytest.Hang, Path: cp}}, "retrying", ""},
		{"connection reset", times(3, qdaytest.Fault{Kind: qdaytest.Reset, Path: cp}), "retrying", ""},
		{"garbage body", times(3, qdaytest.Fault{Kind: qdaytest.Garbage500, Path: cp}), "retrying", "500"},
		{"401", []qdaytest.Fault{{Kind: qdaytest.Status401, Path: cp}}, "unauthorized", "401"},
		{"403", []qdaytest.Fault{{Kind: qdaytest.Status403, Path: cp}}, "unauthorized", "403"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.fake.Script(c.faults...)
			key := r.write(t, c.name)
			u := r.waitState(t, c.state)
			if c.code != "" && !strings.Contains(fmt.Sprint(u["last_error"]), c.code) {
				t.Fatalf("last_error %v does not name %s", u["last_error"], c.code)
			}
			if u["next_attempt"] == nil || u["pending"].(float64) < 1 {
				t.Fatalf("state while failing: %v", u)
			}
			if c.state == "unauthorized" {
				// The operator renews the token: a reload retries at once.
				if err := r.d.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			r.waitDelivered(t, key)
			r.waitState(t, "ok")
		})
	}

	t.Run("slow answer", func(t *testing.T) {
		r.fake.Script(qdaytest.Fault{Kind: qdaytest.Slow, Delay: 300 * time.Millisecond, Path: cp})
		key := r.write(t, "slow")
		r.waitDelivered(t, key)
		if u := r.upstream(); u["state"] != "ok" {
			t.Fatalf("a slow answer within the timeout is not a failure: %v", u)
		}
	})

	t.Run("400 goes to the dead letter, then an operator retries it", func(t *testing.T) {
		r.fake.Script(qdaytest.Fault{Kind: qdaytest.Status400, Path: cp})
		bad := r.write(t, "refused for good")
		next := r.write(t, "the next write is not held up")
		r.waitDelivered(t, next)
		u := r.waitState(t, "rejected")
		if u["dead_letter"].(float64) != 1 || !strings.Contains(fmt.Sprint(u["last_error"]), "") {
			t.Fatalf("dead letter: %v", u)
		}
		dl := r.expectOK("GET", "/v1/deadletter", nil)["entries"].([]any)
		if len(dl) != 1 || !strings.Contains(dl[0].(map[string]any)["error"].(string), "400") {
			t.Fatalf("dead letter entries: %v", dl)
		}
		r.expectOK("POST", "/v1/deadletter/retry", map[string]any{"upstream": "qday"})
		r.waitDelivered(t, bad)
		r.waitState(t, "ok")
	})

	t.Run("409 pauses until resume_residency", func(t *testing.T) {
		r.fake.Script(qdaytest.Fault{Kind: qdaytest.Status409, Path: cp})
		blocked := r.write(t, "refused while stopped upstream")
		r.waitState(t, "paused")
		m := r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"resume_residency": true})
		resume := r.keyOf(t, uint64(m["seq"].(float64)))
		r.waitDelivered(t, resume)
		dl := r.expectOK("GET", "/v1/deadletter", nil)["entries"].([]any)
		found := slices.ContainsFunc(dl, func(e any) bool {
			return e.(map[string]any)["write"].(map[string]any)["idempotency_key"] == blocked
		})
		if !found {
			t.Fatalf("the write refused while stopped is not in the dead letter: %v", dl)
		}
		r.expectOK("POST", "/v1/deadletter/discard", map[string]any{"upstream": "qday"})
		r.waitState(t, "ok")
	})
}

// TestResumeDegradedWhenUpstreamDown: the local answer comes back within a
// short bound, naming the upstream that could not be read.
func TestResumeDegradedWhenUpstreamDown(t *testing.T) {
	r := startQDayRig(t, qdaytest.Options{}, func(c *config.Config) {
		c.Outbox.ResumeTimeout = config.Duration{Duration: 300 * time.Millisecond}
	})
	r.fake.SetDirections(json.RawMessage(`{"id":"d1","text":"review the parser"}`))
	res := r.resume("?peek=1")
	if len(res["degraded"].([]any)) != 0 || len(res["directions"].([]any)) != 1 {
		t.Fatalf("with the upstream up: %v %v", res["degraded"], res["directions"])
	}
	r.fake.Script(qdaytest.Fault{Kind: qdaytest.Hang, Path: qday.ResumePath})
	start := time.Now()
	res = r.resume("?peek=1")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("resume took %v with the upstream hanging", took)
	}
	if d := res["degraded"].([]any); len(d) != 1 || d[0] != "qday" {
		t.Fatalf("degraded: %v", d)
	}
	// The last view the upstream gave is still shown.
	if len(res["directions"].([]any)) != 1 {
		t.Fatalf("directions from the last view: %v", res["directions"])
	}
}

// TestDelxCapsulesAndSessionEnd: capsules reach the fake Delx as
// leave_hive_note, a session end as close_session, and resume_session is
// folded into resume.
func TestDelxCapsulesAndSessionEnd(t *testing.T) {
	// The upstream's shared token (an agent without an identity of its own)
	// goes under the agent's name and the session_id continuityd made up.
	fake := delxtest.New(delxtest.Options{AgentTokens: map[string]string{"builder": "delx-token"},
		Sessions: map[string]string{"continuityd-builder": "builder"}})
	t.Cleanup(fake.Close)
	t.Setenv("CD_TEST_DELX_TOKEN", "delx-token")
	cfg := testConfig(t)
	cfg.Upstreams = map[string]config.Upstream{"delx": {Kind: config.KindDelx, URL: fake.URL(), TokenEnv: "CD_TEST_DELX_TOKEN",
		Rate: 100, Burst: 10, Timeout: config.Duration{Duration: 5 * time.Second}}}
	cfg.Agents[0].Upstreams = []string{"local", "delx"}
	td := startDaemon(t, cfg)
	td.expectOK("PUT", "/v1/capsule", map[string]any{"version": "1", "goal": "hand the parser work over", "refuted": "batching: not idempotent"})
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "not for delx"})
	td.expectOK("POST", "/v1/capsule/seal", nil)
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "session", "event": "end", "reason": "logout"})
	waitFor(t, 60*time.Second, func() bool {
		tools := map[string]int{}
		for _, c := range fake.Calls() {
			if c.Result == "ok" {
				tools[c.Tool]++
			}
		}
		return tools["leave_hive_note"] == 2 && tools["close_session"] == 1
	})
	notes := fake.Notes()
	if !strings.Contains(string(notes[0]), "hand the parser work over") {
		t.Fatalf("first note: %s", notes[0])
	}
	for _, c := range fake.Calls() {
		if c.AgentID != "builder" || (c.Tool != "resume_session" && c.IdempotencyKey == "") {
			t.Fatalf("call without identity or key: %+v", c)
		}
	}
	res := td.resume("?peek=1")
	if _, ok := res["remote"].(map[string]any)["delx"]; !ok {
		t.Fatalf("resume_session not folded into resume: %v", res["remote"])
	}
	for _, u := range res["upstreams"].([]any) {
		if u.(map[string]any)["state"] != "ok" {
			t.Fatalf("upstream state: %v", u)
		}
	}
}

func times(n int, f qdaytest.Fault) []qdaytest.Fault {
	out := make([]qdaytest.Fault, n)
	for i := range out {
		out[i] = f
	}
	return out
}
