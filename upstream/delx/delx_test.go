package delx_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
	"github.com/continuityd/continuityd/upstream/delx"
	"github.com/continuityd/continuityd/upstream/delxtest"
)

const (
	agent   = "agent-a"
	token   = "tok-a-0123456789"
	session = "sess-a-1"
)

// identity is an Identity source giving every agent agent's id and
// session with the token tok returns (its error too).
func identity(tok func() (string, error)) func(string) (delx.Identity, error) {
	return func(string) (delx.Identity, error) {
		t, err := tok()
		return delx.Identity{AgentID: agent, SessionID: session, Token: t}, err
	}
}

// env is one fake and one client pointed at it.
type env struct {
	fake   *delxtest.Server
	client *delx.Client
	token  *atomic.Value // what the client's Token returns
}

type envOpts struct {
	fake    delxtest.Options
	timeout time.Duration
	http    *http.Client
}

// setup starts a fake that knows agent/token and a client for it; both are
// closed, and goroutine leaks checked, when the test ends.
func setup(t *testing.T, o envOpts) *env {
	t.Helper()
	t.Cleanup(func() { verifyNoLeaks(t) })
	if o.fake.AgentTokens == nil {
		o.fake.AgentTokens = map[string]string{agent: token}
	}
	if o.fake.Sessions == nil {
		o.fake.Sessions = map[string]string{session: agent}
	}
	fake := delxtest.New(o.fake)
	t.Cleanup(fake.Close)
	tok := new(atomic.Value)
	tok.Store(token)
	c, err := delx.New(delx.Options{
		Name:       "delx",
		URL:        fake.URL(),
		Identity:   identity(func() (string, error) { return tok.Load().(string), nil }),
		Timeout:    o.timeout,
		HTTPClient: o.http,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{fake: fake, client: c, token: tok}
}

func testCapsule() *capsule.Capsule {
	return &capsule.Capsule{
		Version:   "1",
		Goal:      "Migrate the billing module to the new client",
		Done:      "Adapters written, unit tests green, staging deploy verified",
		Next:      "Swap the callsites in checkout, then delete the shim",
		Refuted:   "Batching the migration fails — the old client is not idempotent",
		Receipts:  []string{"repo@a1b2c3d", "staging deploy 2026-08-08T11:04Z"},
		WrittenBy: "acme-refactor-bot",
		TTLDays:   json.RawMessage("14"),
	}
}

func write(kind capsule.WriteKind, seq uint64, c *capsule.Capsule) capsule.Write {
	return capsule.Write{
		Seq:            seq,
		Kind:           kind,
		Origin:         capsule.OriginExplicit,
		At:             time.Now(),
		IdempotencyKey: "idem-" + string(kind) + "-" + string(rune('0'+seq%10)),
		Capsule:        c,
	}
}

func deliver(t *testing.T, e *env, w capsule.Write) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return e.client.Deliver(ctx, agent, w)
}

func mustDeliver(t *testing.T, e *env, w capsule.Write) {
	t.Helper()
	if err := deliver(t, e, w); err != nil {
		t.Fatalf("Deliver(%s): %v", w.Kind, err)
	}
}

func decodeCapsule(t *testing.T, raw json.RawMessage) *capsule.Capsule {
	t.Helper()
	var c capsule.Capsule
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return &c
}

func asUpstreamError(t *testing.T, err error) *upstream.Error {
	t.Helper()
	var ue *upstream.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v (%T) is not an *upstream.Error", err, err)
	}
	return ue
}

var outcomeNames = map[upstream.Outcome]string{
	upstream.Retry: "Retry", upstream.RateLimited: "RateLimited", upstream.Unauthorized: "Unauthorized",
	upstream.Stopped: "Stopped", upstream.Rejected: "Rejected",
}

func TestBasics(t *testing.T) {
	e := setup(t, envOpts{})
	if e.client.Name() != "delx" || e.client.Kind() != delx.Kind {
		t.Fatalf("Name/Kind = %q/%q", e.client.Name(), e.client.Kind())
	}
	for k, want := range map[capsule.WriteKind]bool{
		capsule.WriteCapsule: true, capsule.WriteSeal: true, capsule.WriteSessionEnd: true, capsule.WriteCheckpoint: false,
	} {
		if got := e.client.Accepts(k); got != want {
			t.Errorf("Accepts(%s) = %v, want %v", k, got, want)
		}
	}
	var _ upstream.Upstream = e.client
	var _ upstream.Resumer = e.client
	if len(e.fake.Requests()) != 0 {
		t.Fatal("New connected eagerly")
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	tok := identity(func() (string, error) { return "x", nil })
	for name, o := range map[string]delx.Options{
		"no name":           {URL: "https://api.delx.ai/v1/mcp", Identity: tok},
		"relative url":      {Name: "d", URL: "/v1/mcp", Identity: tok},
		"other scheme":      {Name: "d", URL: "ftp://api.delx.ai/v1/mcp", Identity: tok},
		"credential in url": {Name: "d", URL: "https://agent:secret@api.delx.ai/v1/mcp", Identity: tok},
		"no identity":       {Name: "d", URL: "https://api.delx.ai/v1/mcp"},
	} {
		if c, err := delx.New(o); err == nil {
			c.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error echoes the credential: %v", name, err)
		}
	}
}

func TestDeliverCapsule(t *testing.T) {
	e := setup(t, envOpts{})
	sent := testCapsule()
	w := write(capsule.WriteCapsule, 1, sent)
	mustDeliver(t, e, w)

	calls := e.fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %+v", calls)
	}
	c := calls[0]
	if c.Tool != delx.ToolLeaveHiveNote || c.Result != "ok" {
		t.Fatalf("call = %s %s (%s)", c.Tool, c.Result, c.Message)
	}
	if c.AgentID != agent || c.SessionID != session {
		t.Errorf("agent/session = %q/%q", c.AgentID, c.SessionID)
	}
	if c.IdempotencyKey != w.IdempotencyKey || c.MetaIdempotencyKey != w.IdempotencyKey {
		t.Errorf("idempotency key header/meta = %q/%q, want %q", c.IdempotencyKey, c.MetaIdempotencyKey, w.IdempotencyKey)
	}
	if got := c.Header.Get("Idempotency-Key"); got != w.IdempotencyKey {
		t.Errorf("Idempotency-Key header = %q", got)
	}
	if got := c.Header.Get(delx.HeaderAgentToken); got != token {
		t.Errorf("token header = %q", got)
	}
	if got := c.Header.Get("Accept"); !strings.Contains(got, "application/json") || !strings.Contains(got, "text/event-stream") {
		t.Errorf("Accept = %q", got)
	}
	if got := decodeCapsule(t, c.Capsule); !reflect.DeepEqual(got, sent) {
		t.Errorf("capsule at Delx = %+v\nwant %+v", got, sent)
	}
	notes := e.fake.Notes()
	if len(notes) != 1 || !reflect.DeepEqual(decodeCapsule(t, notes[0]), sent) {
		t.Errorf("notes = %s", notes)
	}

	// Every HTTP request carried the credential in headers, none in the URL;
	// connecting was initialize + initialized, then the one call.
	var methods []string
	for _, r := range e.fake.Requests() {
		methods = append(methods, r.Method+" "+r.RPCMethod)
		if r.AgentID != agent {
			t.Errorf("%s %s without the agent header", r.Method, r.RPCMethod)
		}
		if strings.Contains(r.URL, token) || strings.Contains(r.URL, agent) || strings.Contains(r.URL, "?") {
			t.Errorf("request URL %q carries something", r.URL)
		}
	}
	if want := []string{"POST initialize", "POST notifications/initialized", "POST tools/call"}; !reflect.DeepEqual(methods, want) {
		t.Errorf("requests = %q, want %q", methods, want)
	}
}

func TestDeliverSealReusesTheSession(t *testing.T) {
	e := setup(t, envOpts{})
	first := testCapsule()
	seal := testCapsule()
	seal.Next = "Sealed: delete the shim"
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, first))
	mustDeliver(t, e, write(capsule.WriteSeal, 2, seal))

	calls := e.fake.Calls()
	if len(calls) != 2 || calls[1].Tool != delx.ToolLeaveHiveNote || calls[1].Result != "ok" {
		t.Fatalf("calls = %+v", calls)
	}
	if !reflect.DeepEqual(decodeCapsule(t, calls[1].Capsule), seal) {
		t.Errorf("sealed capsule differs")
	}
	if calls[1].IdempotencyKey == calls[0].IdempotencyKey {
		t.Errorf("two writes shared a key")
	}
	inits, sessions := 0, map[string]bool{}
	for _, r := range e.fake.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
		if r.RPCMethod == "tools/call" {
			sessions[r.MCPSessionID] = true
		}
	}
	if inits != 1 || len(sessions) != 1 {
		t.Errorf("initialize x%d, sessions %v: want one session reused", inits, sessions)
	}
}

func TestDeliverSessionEnd(t *testing.T) {
	e := setup(t, envOpts{})
	sealed := testCapsule()
	sealed.Done = "Everything, session over"
	w := write(capsule.WriteSessionEnd, 3, sealed)
	w.SessionID = "claude-session-1"
	w.Reason = "agent exited"
	mustDeliver(t, e, w)
	// And one without a capsule.
	w2 := write(capsule.WriteSessionEnd, 4, nil)
	mustDeliver(t, e, w2)

	calls := e.fake.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	for i, c := range calls {
		if c.Tool != delx.ToolCloseSession || c.Result != "ok" || c.SessionID != session {
			t.Errorf("call %d = %s %s session %q", i, c.Tool, c.Result, c.SessionID)
		}
	}
	if calls[0].IdempotencyKey != w.IdempotencyKey {
		t.Errorf("key = %q", calls[0].IdempotencyKey)
	}
	if !reflect.DeepEqual(decodeCapsule(t, calls[0].Capsule), sealed) {
		t.Errorf("sealed capsule differs")
	}
	if calls[1].Capsule != nil {
		t.Errorf("a capsule-less session end sent %s", calls[1].Capsule)
	}
	if len(e.fake.Notes()) != 0 {
		t.Errorf("close_session counted as a hive note")
	}
}

func TestResumeRoundTrip(t *testing.T) {
	e := setup(t, envOpts{})
	ctx := context.Background()

	raw, err := e.client.Resume(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	var empty struct {
		Found        bool `json:"found"`
		LookbackDays int  `json:"lookback_days"`
	}
	if err := json.Unmarshal(raw, &empty); err != nil || empty.Found || empty.LookbackDays != 30 {
		t.Fatalf("resume before any note = %s (%v)", raw, err)
	}

	sent := testCapsule()
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, sent))
	raw, err = e.client.Resume(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		AgentID    string          `json:"agent_id"`
		Found      bool            `json:"found"`
		Capsule    json.RawMessage `json:"capsule"`
		WrittenAt  time.Time       `json:"written_at"`
		AgeSeconds *int64          `json:"age_seconds"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("resume = %s: %v", raw, err)
	}
	if !got.Found || got.AgentID != agent || got.AgeSeconds == nil || got.WrittenAt.IsZero() {
		t.Fatalf("resume = %s", raw)
	}
	if !reflect.DeepEqual(decodeCapsule(t, got.Capsule), sent) {
		t.Errorf("resumed capsule = %s", got.Capsule)
	}
	calls := e.fake.Calls()
	last := calls[len(calls)-1]
	if last.Tool != delx.ToolResumeSession || last.IdempotencyKey != "" || last.Header.Get("Idempotency-Key") != "" {
		t.Errorf("resume call = %+v", last)
	}
}

func TestResumeToolErrorIsAnError(t *testing.T) {
	e := setup(t, envOpts{})
	e.fake.Script(delxtest.ToolError("lookback_days must be an integer from 1 to 90"))
	_, err := e.client.Resume(context.Background(), agent)
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Rejected {
		t.Fatalf("outcome = %s", outcomeNames[ue.Outcome])
	}
}

// TestFaults plays each fault on the call of a connected client and checks
// the outcome, then that the next delivery goes through.
func TestFaults(t *testing.T) {
	soon := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		fault      delxtest.Fault
		outcome    upstream.Outcome
		status     int
		retryAfter time.Duration // exact, unless approx
		approx     bool
		code       string
		reconnect  bool // the next call must use a new MCP session
	}{
		{name: "429 with Retry-After", fault: delxtest.TooManyRequests("7"), outcome: upstream.RateLimited, status: 429, retryAfter: 7 * time.Second},
		{name: "429 without Retry-After", fault: delxtest.TooManyRequests(""), outcome: upstream.RateLimited, status: 429},
		{name: "429 with an HTTP date", fault: delxtest.TooManyRequests(soon), outcome: upstream.RateLimited, status: 429, retryAfter: 90 * time.Second, approx: true},
		{name: "429 with a JSON-RPC -32029 body", fault: delxtest.Fault{Status: 429, RetryAfter: "3", RPCCode: -32029, RetryAfterSeconds: 9}, outcome: upstream.RateLimited, status: 429, retryAfter: 9 * time.Second, code: "-32029"},
		{name: "JSON-RPC -32029", fault: delxtest.RPCRateLimited(12), outcome: upstream.RateLimited, retryAfter: 12 * time.Second, code: "-32029"},
		{name: "JSON-RPC -32029 without data", fault: delxtest.RPCError(-32029, "slow down"), outcome: upstream.RateLimited, code: "-32029"},
		{name: "500", fault: delxtest.HTTPStatus(500), outcome: upstream.Retry, status: 500},
		{name: "502", fault: delxtest.HTTPStatus(502), outcome: upstream.Retry, status: 502},
		{name: "503", fault: delxtest.HTTPStatus(503), outcome: upstream.Retry, status: 503},
		{name: "408", fault: delxtest.HTTPStatus(408), outcome: upstream.Retry, status: 408, reconnect: true},
		{name: "401", fault: delxtest.HTTPStatus(401), outcome: upstream.Unauthorized, status: 401, reconnect: true},
		{name: "403", fault: delxtest.HTTPStatus(403), outcome: upstream.Unauthorized, status: 403, reconnect: true},
		{name: "406", fault: delxtest.HTTPStatus(406), outcome: upstream.Rejected, status: 406, reconnect: true},
		{name: "400", fault: delxtest.HTTPStatus(400), outcome: upstream.Rejected, status: 400, reconnect: true},
		{name: "422", fault: delxtest.HTTPStatus(422), outcome: upstream.Rejected, status: 422, reconnect: true},
		{name: "404, the MCP session is gone", fault: delxtest.HTTPStatus(404), outcome: upstream.Retry, status: 404, reconnect: true},
		{name: "400 with a JSON-RPC body", fault: delxtest.Fault{Status: 400, RPCCode: -32602, Message: "invalid params"}, outcome: upstream.Rejected, status: 400, code: "-32602"},
		{name: "reset", fault: delxtest.Reset(), outcome: upstream.Retry, reconnect: true},
		{name: "garbage", fault: delxtest.Garbage(), outcome: upstream.Retry, reconnect: true},
		{name: "slow past the timeout", fault: delxtest.Slow(30 * time.Second), outcome: upstream.Retry},
		{name: "JSON-RPC invalid params", fault: delxtest.RPCError(-32602, "unknown argument"), outcome: upstream.Rejected, code: "-32602"},
		{name: "JSON-RPC internal error", fault: delxtest.RPCError(-32603, "database unavailable"), outcome: upstream.Retry, code: "-32603"},
		{name: "JSON-RPC error saying unauthorized", fault: delxtest.RPCError(-32001, "Unauthorized: invalid agent token"), outcome: upstream.Unauthorized, code: "-32001"},
		{name: "tool error", fault: delxtest.ToolError("capsule refused: INVALID_CAPSULE: version: must be one of 1, 1.0, v1"), outcome: upstream.Rejected},
		{name: "tool error saying rate limit", fault: delxtest.ToolError("Rate limit exceeded; retry after 20 seconds"), outcome: upstream.RateLimited, retryAfter: 20 * time.Second},
		{name: "tool error saying try again in minutes", fault: delxtest.ToolError("too many requests, try again in 2 minutes"), outcome: upstream.RateLimited, retryAfter: 2 * time.Minute},
		{name: "tool error saying auth", fault: delxtest.ToolError("unauthorized: agent token expired"), outcome: upstream.Unauthorized},
		{name: "tool error about a secret is not auth", fault: delxtest.ToolError("SECRET_DETECTED: done: a credential-shaped value (invalid token pattern); refused before storage"), outcome: upstream.Rejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := envOpts{timeout: 5 * time.Second}
			if tc.fault.Delay > 0 {
				o.timeout = 2 * time.Second
			}
			if tc.fault.Reset {
				// net/http replays a request that carries an Idempotency-Key
				// once when a reused connection dies under it; a fresh
				// connection per request makes the reset reach the client.
				o.http = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			}
			e := setup(t, o)
			mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule())) // connect
			sessionBefore := lastCallSession(e.fake)

			tc.fault.Method = "tools/call"
			e.fake.Script(tc.fault)
			start := time.Now()
			err := deliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
			if err == nil {
				t.Fatal("Deliver succeeded through the fault")
			}
			if e.fake.Pending() != 0 {
				t.Fatalf("the fault was not played")
			}
			ue := asUpstreamError(t, err)
			if ue.Outcome != tc.outcome {
				t.Fatalf("outcome = %s, want %s (%v)", outcomeNames[ue.Outcome], outcomeNames[tc.outcome], err)
			}
			if ue.Status != tc.status {
				t.Errorf("status = %d, want %d (%v)", ue.Status, tc.status, err)
			}
			if tc.code != "" && ue.Code != tc.code {
				t.Errorf("code = %q, want %q", ue.Code, tc.code)
			}
			if tc.approx {
				if d := ue.RetryAfter - tc.retryAfter; d < -3*time.Second || d > time.Second {
					t.Errorf("RetryAfter = %v, want about %v", ue.RetryAfter, tc.retryAfter)
				}
			} else if ue.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", ue.RetryAfter, tc.retryAfter)
			}
			if tc.fault.Delay > 0 && time.Since(start) > 15*time.Second {
				t.Errorf("the timeout did not cut the slow call short (%v)", time.Since(start))
			}
			if upstream.Classify(err) != tc.outcome {
				t.Errorf("upstream.Classify disagrees")
			}

			// The next delivery goes through, on a new session after a
			// transport failure.
			mustDeliver(t, e, write(capsule.WriteCapsule, 3, testCapsule()))
			sessionAfter := lastCallSession(e.fake)
			if tc.reconnect && sessionAfter == sessionBefore {
				t.Errorf("no reconnect after %s", tc.name)
			}
			if !tc.reconnect && sessionAfter != sessionBefore {
				t.Errorf("reconnected after %s, which leaves the session usable", tc.name)
			}
		})
	}
}

// lastCallSession is the MCP session of the last tools/call.
func lastCallSession(fake *delxtest.Server) string {
	reqs := fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].RPCMethod == "tools/call" {
			return reqs[i].MCPSessionID
		}
	}
	return ""
}

func TestFaultDuringConnect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   delxtest.Fault
		outcome upstream.Outcome
	}{
		{"503", delxtest.HTTPStatus(503), upstream.Retry},
		{"401", delxtest.HTTPStatus(401), upstream.Unauthorized},
		{"429", delxtest.TooManyRequests("5"), upstream.RateLimited},
		{"garbage", delxtest.Garbage(), upstream.Retry},
		{"reset", delxtest.Reset(), upstream.Retry},
		{"JSON-RPC -32029", delxtest.RPCRateLimited(4), upstream.RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, envOpts{timeout: 5 * time.Second})
			tc.fault.Method = "initialize"
			e.fake.Script(tc.fault)
			err := deliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
			if ue := asUpstreamError(t, err); ue.Outcome != tc.outcome {
				t.Errorf("outcome %s, want %s (%v)", outcomeNames[ue.Outcome], outcomeNames[tc.outcome], err)
			}
			mustDeliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
		})
	}
}

func TestRateLimitStyles(t *testing.T) {
	for _, style := range []string{delxtest.StyleHTTP, delxtest.StyleJSONRPC, delxtest.StyleBoth} {
		t.Run(style, func(t *testing.T) {
			// Connecting costs two requests, each delivery one.
			e := setup(t, envOpts{fake: delxtest.Options{Limit: 4, Window: time.Minute, RateLimitStyle: style}})
			mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
			mustDeliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
			err := deliver(t, e, write(capsule.WriteCapsule, 3, testCapsule()))
			ue := asUpstreamError(t, err)
			if ue.Outcome != upstream.RateLimited {
				t.Fatalf("outcome = %s (%v)", outcomeNames[ue.Outcome], err)
			}
			if ue.RetryAfter <= 50*time.Second || ue.RetryAfter > time.Minute {
				t.Errorf("RetryAfter = %v, want just under a minute", ue.RetryAfter)
			}
			wantStatus, wantCode := 429, "RATE_LIMITED" // the fake's error body
			switch style {
			case delxtest.StyleJSONRPC:
				wantStatus, wantCode = 0, "-32029"
			case delxtest.StyleBoth:
				wantCode = "-32029"
			}
			if ue.Status != wantStatus || ue.Code != wantCode {
				t.Errorf("status/code = %d/%q, want %d/%q", ue.Status, ue.Code, wantStatus, wantCode)
			}
			calls := e.fake.Calls()
			if last := calls[len(calls)-1]; last.Result != "rate_limited" {
				t.Errorf("last call = %s", last.Result)
			}
			if n := e.fake.MaxInWindow(time.Minute); n != 5 {
				t.Errorf("MaxInWindow = %d, want 5 (4 allowed + 1 refused)", n)
			}
		})
	}
}

// fakeSecret is a GitHub-token-shaped value, made up at run time so no
// scanner of this repository mistakes it for a real one.
func fakeSecret() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(7, 11))
	b := make([]byte, 36)
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	return "gh" + "p_" + string(b)
}

func TestCapsuleWithCredentialIsRejected(t *testing.T) {
	e := setup(t, envOpts{})
	secret := fakeSecret()
	c := testCapsule()
	c.Blockers = "staging deploy needs the token " + secret + " rotated"
	err := deliver(t, e, write(capsule.WriteCapsule, 1, c))
	ue := asUpstreamError(t, err)
	if ue.Outcome != upstream.Rejected {
		t.Fatalf("outcome = %s (%v)", outcomeNames[ue.Outcome], err)
	}
	msg := err.Error()
	if strings.Contains(msg, secret) || strings.Contains(msg, secret[4:20]) || strings.Contains(msg, "rotated") {
		t.Fatalf("error echoes the capsule: %s", msg)
	}
	if !strings.Contains(msg, "SECRET") && !strings.Contains(strings.ToLower(msg), "secret") {
		t.Errorf("error does not say why: %s", msg)
	}
	if len([]rune(msg)) > 300 {
		t.Errorf("error is %d characters", len([]rune(msg)))
	}
	calls := e.fake.Calls()
	if len(calls) != 1 || calls[0].Result != "tool_error" || calls[0].Capsule != nil {
		t.Fatalf("calls = %+v", calls)
	}
	if strings.Contains(calls[0].Message, secret) {
		t.Errorf("the fake echoed the secret: %s", calls[0].Message)
	}
	if len(e.fake.Notes()) != 0 {
		t.Errorf("a capsule with a credential was stored")
	}
}

func TestSchemaFailureIsRejected(t *testing.T) {
	e := setup(t, envOpts{})
	c := testCapsule()
	c.Version = "2"
	err := deliver(t, e, write(capsule.WriteCapsule, 1, c))
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Rejected || !strings.Contains(err.Error(), "INVALID_CAPSULE") {
		t.Fatalf("outcome %s: %v", outcomeNames[ue.Outcome], err)
	}
}

func TestToolErrorTextIsScrubbedAndCut(t *testing.T) {
	e := setup(t, envOpts{})
	secret := fakeSecret()
	c := testCapsule()
	c.Done = "deployed with " + secret
	long := strings.Repeat("blah ", 100)
	e.fake.Script(delxtest.ToolError("refused: field done is \"" + c.Done + "\", value " + secret + " " + long))
	err := deliver(t, e, write(capsule.WriteCapsule, 1, c))
	ue := asUpstreamError(t, err)
	if ue.Outcome != upstream.Rejected {
		t.Fatalf("outcome = %s", outcomeNames[ue.Outcome])
	}
	msg := err.Error()
	if strings.Contains(msg, secret) || strings.Contains(msg, "deployed with") {
		t.Fatalf("error echoes the capsule: %s", msg)
	}
	if !strings.Contains(msg, "…") || len([]rune(msg)) > 260 {
		t.Errorf("message not cut to 200 characters: %d: %s", len([]rune(msg)), msg)
	}
}

func TestWrongTokenIsUnauthorized(t *testing.T) {
	e := setup(t, envOpts{})
	e.token.Store("not-the-token")
	err := deliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
	ue := asUpstreamError(t, err)
	if ue.Outcome != upstream.Unauthorized || ue.Status != 401 {
		t.Fatalf("outcome %s status %d: %v", outcomeNames[ue.Outcome], ue.Status, err)
	}
	if strings.Contains(err.Error(), "not-the-token") {
		t.Errorf("error echoes the token: %v", err)
	}
}

func TestTokenIsReadAgainAfterAChange(t *testing.T) {
	e := setup(t, envOpts{})
	e.token.Store("stale")
	if err := deliver(t, e, write(capsule.WriteCapsule, 1, testCapsule())); upstream.Classify(err) != upstream.Unauthorized {
		t.Fatalf("with a stale token: %v", err)
	}
	// A reload: the very next call uses the new token, no restart.
	e.token.Store(token)
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))

	// A rotation on both sides keeps the open MCP session: the token is read
	// per request, not per connection.
	e.fake.SetToken(agent, "rotated-token-1")
	e.token.Store("rotated-token-1")
	mustDeliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
	calls := e.fake.Calls()
	last := calls[len(calls)-1]
	if last.Result != "ok" || last.Header.Get(delx.HeaderAgentToken) != "rotated-token-1" {
		t.Fatalf("last call %s with token %q", last.Result, last.Header.Get(delx.HeaderAgentToken))
	}
	inits := 0
	for _, r := range e.fake.Requests() {
		if r.RPCMethod == "initialize" && r.Status == 200 {
			inits++
		}
	}
	if inits != 1 {
		t.Errorf("%d successful initializes, want 1", inits)
	}
}

func TestUnreadableTokenSendsNothing(t *testing.T) {
	for name, tok := range map[string]func() (string, error){
		"error": func() (string, error) { return "", errors.New("open /etc/continuityd/delx.token: permission denied") },
		"empty": func() (string, error) { return "  ", nil },
		"crlf":  func() (string, error) { return "abc\r\nX-Evil: 1", nil },
	} {
		t.Run(name, func(t *testing.T) {
			e := setup(t, envOpts{})
			c, err := delx.New(delx.Options{Name: "delx", URL: e.fake.URL(), Identity: identity(tok)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Deliver(context.Background(), agent, write(capsule.WriteCapsule, 1, testCapsule()))
			if ue := asUpstreamError(t, err); ue.Outcome != upstream.Unauthorized {
				t.Fatalf("outcome %s: %v", outcomeNames[ue.Outcome], err)
			}
			if n := len(e.fake.Requests()); n != 0 {
				t.Fatalf("%d requests reached Delx", n)
			}
		})
	}
}

func TestAgentAndSessionMapping(t *testing.T) {
	t.Cleanup(func() { verifyNoLeaks(t) })
	fake := delxtest.New(delxtest.Options{AgentTokens: map[string]string{"delx-agent-7": token}, Sessions: map[string]string{"sess-local-name": "delx-agent-7"}})
	defer fake.Close()
	c, err := delx.New(delx.Options{
		Name: "delx",
		URL:  fake.URL(),
		Identity: func(a string) (delx.Identity, error) {
			return delx.Identity{AgentID: "delx-agent-7", SessionID: "sess-" + a, Token: token}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Deliver(context.Background(), "local-name", write(capsule.WriteCapsule, 1, testCapsule())); err != nil {
		t.Fatal(err)
	}
	if calls := fake.Calls(); calls[0].AgentID != "delx-agent-7" || calls[0].SessionID != "sess-local-name" {
		t.Fatalf("call = %+v", calls[0])
	}
	if _, err := c.Resume(context.Background(), "local-name"); err != nil {
		t.Fatal(err)
	}
}

func TestWritesThatCannotGo(t *testing.T) {
	e := setup(t, envOpts{})
	for _, w := range []capsule.Write{
		{Kind: capsule.WriteCheckpoint, IdempotencyKey: "k"},
		{Kind: capsule.WriteCapsule, IdempotencyKey: "k"}, // no capsule
	} {
		if err := e.client.Deliver(context.Background(), agent, w); upstream.Classify(err) != upstream.Rejected {
			t.Errorf("%s: %v", w.Kind, err)
		}
	}
	if len(e.fake.Requests()) != 0 {
		t.Errorf("something was sent")
	}
}

func TestRedirectToAnotherHostIsNotFollowed(t *testing.T) {
	e := setup(t, envOpts{})
	var sawToken atomic.Bool
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(delx.HeaderAgentToken) != "" {
			sawToken.Store(true)
		}
		http.Redirect(w, r, e.fake.URL(), http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	c, err := delx.New(delx.Options{Name: "delx", URL: redirect.URL + "/v1/mcp", Identity: identity(func() (string, error) { return token, nil })})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Deliver(context.Background(), agent, write(capsule.WriteCapsule, 1, testCapsule()))
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Retry || ue.Status != http.StatusTemporaryRedirect {
		t.Fatalf("outcome %s status %d: %v", outcomeNames[ue.Outcome], ue.Status, err)
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("the redirect was followed to another host (%d requests)", n)
	}
	if !sawToken.Load() {
		t.Fatal("the configured host did not get the credential")
	}
}

func TestServerDown(t *testing.T) {
	e := setup(t, envOpts{timeout: 2 * time.Second})
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
	e.fake.Close()
	err := deliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Retry {
		t.Fatalf("outcome %s: %v", outcomeNames[ue.Outcome], err)
	}
	// Connecting to nothing is a Retry too.
	err = deliver(t, e, write(capsule.WriteCapsule, 3, testCapsule()))
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Retry {
		t.Fatalf("outcome %s: %v", outcomeNames[ue.Outcome], err)
	}
}

func TestClosedClient(t *testing.T) {
	e := setup(t, envOpts{})
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
	if err := e.client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := deliver(t, e, write(capsule.WriteCapsule, 2, testCapsule())); upstream.Classify(err) != upstream.Retry {
		t.Fatalf("after Close: %v", err)
	}
	// The MCP session was closed with a DELETE.
	reqs := e.fake.Requests()
	if last := reqs[len(reqs)-1]; last.Method != http.MethodDelete {
		t.Errorf("last request %s %s, want the session DELETE", last.Method, last.RPCMethod)
	}
}

func TestConcurrentAgents(t *testing.T) {
	// Each agent behind one [upstream] has its own identity.
	tokens := map[string]string{"a1": "tok-1", "a2": "tok-2", "a3": "tok-3"}
	sessions := map[string]string{"s-a1": "a1", "s-a2": "a2", "s-a3": "a3"}
	t.Cleanup(func() { verifyNoLeaks(t) })
	fake := delxtest.New(delxtest.Options{AgentTokens: tokens, Sessions: sessions})
	defer fake.Close()
	c, err := delx.New(delx.Options{Name: "delx", URL: fake.URL(), Identity: func(a string) (delx.Identity, error) {
		return delx.Identity{AgentID: a, SessionID: "s-" + a, Token: tokens[a]}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errs := make(chan error, 9)
	for _, a := range []string{"a1", "a2", "a3"} {
		go func() {
			for i := range 3 {
				errs <- c.Deliver(context.Background(), a, write(capsule.WriteCapsule, uint64(i), testCapsule()))
			}
		}()
	}
	for range 9 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	mcpSessions := map[string]map[string]bool{}
	for _, r := range fake.Requests() {
		if r.RPCMethod == "tools/call" {
			if mcpSessions[r.AgentID] == nil {
				mcpSessions[r.AgentID] = map[string]bool{}
			}
			mcpSessions[r.AgentID][r.MCPSessionID] = true
		}
	}
	for a, s := range mcpSessions {
		if len(s) != 1 {
			t.Errorf("agent %s used %d sessions", a, len(s))
		}
	}
	for _, call := range fake.Calls() {
		if call.Result != "ok" || call.Header.Get(delx.HeaderAgentToken) != tokens[call.AgentID] || call.SessionID != "s-"+call.AgentID {
			t.Errorf("call not under its agent's own identity: %s %s %s", call.Result, call.AgentID, call.SessionID)
		}
	}
	if len(mcpSessions) != 3 {
		t.Errorf("sessions = %v", mcpSessions)
	}
}

// verifyNoLeaks fails t if goroutines outlive the test. goleak.VerifyNone
// gives up after about half a second, which a loaded machine (the race
// detector, other builds) can exceed while connections wind down, so this
// keeps asking for up to 10 seconds.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := goleak.Find()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHugeAnswersAreNotReadWhole: a resume_session or a write answered with
// hundreds of megabytes (the SDK reads a JSON answer whole) fails cleanly,
// as a retry and not as "delivered", with the daemon's memory bounded, and
// the next call goes through.
func TestHugeAnswersAreNotReadWhole(t *testing.T) {
	e := setup(t, envOpts{timeout: 60 * time.Second})
	mustDeliver(t, e, write(capsule.WriteCapsule, 1, testCapsule())) // connects
	const huge = 200 << 20
	allocated := func(call func() error) (uint64, error) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := call()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"resume_session", func() error { _, err := e.client.Resume(context.Background(), agent); return err }},
		{"leave_hive_note", func() error { return deliver(t, e, write(capsule.WriteCapsule, 2, testCapsule())) }},
	} {
		e.fake.Script(delxtest.HugeAnswer(huge))
		alloc, err := allocated(c.call)
		if err == nil {
			t.Fatalf("%s answered with %d MB: no error", c.name, huge>>20)
		}
		if !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s: error %q does not say the answer was too large", c.name, err)
		}
		if ue := asUpstreamError(t, err); ue.Outcome != upstream.Retry {
			t.Errorf("%s: outcome %s (%v), want Retry", c.name, outcomeNames[ue.Outcome], err)
		}
		if alloc > 32<<20 {
			t.Errorf("%s: %d MB allocated for a %d MB answer; want it read only to its limit", c.name, alloc>>20, huge>>20)
		}
		if e.fake.Pending() != 0 {
			t.Fatalf("%s: the fault was not played", c.name)
		}
	}
	mustDeliver(t, e, write(capsule.WriteCapsule, 3, testCapsule()))
}

// TestRootCAsPinTheServersCA: with RootCAs (ca_file) a server whose CA is
// not the system's is reached; without, its certificate is refused.
func TestRootCAsPinTheServersCA(t *testing.T) {
	t.Cleanup(func() { verifyNoLeaks(t) })
	fake := delxtest.New(delxtest.Options{TLS: true, AgentTokens: map[string]string{agent: token}, Sessions: map[string]string{session: agent}})
	defer fake.Close()
	pool := x509.NewCertPool()
	pool.AddCert(fake.Certificate())
	for _, c := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{{"system CAs", nil, false}, {"ca_file", pool, true}} {
		cl, err := delx.New(delx.Options{Name: "delx", URL: fake.URL(), RootCAs: c.roots,
			Identity: identity(func() (string, error) { return token, nil })})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = cl.Resume(ctx, agent)
		cancel()
		if (err == nil) != c.ok {
			t.Errorf("%s: Resume over TLS: %v", c.name, err)
		}
		if err := cl.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
