package delxtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

const (
	agent = "agent-a"
	token = "tok-a"
)

func newFake(t *testing.T, o delxtest.Options) *delxtest.Server {
	t.Helper()
	t.Cleanup(func() { verifyNoLeaks(t) })
	if o.AgentTokens == nil {
		o.AgentTokens = map[string]string{agent: token, "agent-b": "tok-b"}
	}
	if o.Sessions == nil {
		o.Sessions = map[string]string{"s1": agent, "s-b": "agent-b"}
	}
	s := delxtest.New(o)
	t.Cleanup(s.Close)
	return s
}

// post sends one raw JSON-RPC POST.
func post(t *testing.T, url string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func creds(agentID, tok string) map[string]string {
	return map[string]string{
		delxtest.HeaderAgentID:    agentID,
		delxtest.HeaderAgentToken: tok,
		"Accept":                  "application/json, text/event-stream",
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestHTTPRules(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	defer http.DefaultClient.CloseIdleConnections()

	h := creds(agent, token)
	h["Accept"] = "text/event-stream"
	if resp := post(t, s.URL(), h, initialize); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("Accept without application/json: %d, want 406", resp.StatusCode)
	}
	h = creds(agent, token)
	delete(h, "Accept")
	if resp := post(t, s.URL(), h, initialize); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("no Accept: %d, want 406", resp.StatusCode)
	}
	for name, h := range map[string]map[string]string{
		"no headers":  {"Accept": "application/json, text/event-stream"},
		"wrong token": creds(agent, "tok-b"),
		"unknown":     creds("agent-z", token),
		"no token":    creds(agent, ""),
	} {
		if resp := post(t, s.URL(), h, initialize); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, resp.StatusCode)
		}
	}
	resp := post(t, s.URL(), creds(agent, token), initialize)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("a good initialize: %d", resp.StatusCode)
	}
	if resp.Header.Get("x-ratelimit-limit") != "60" || resp.Header.Get("x-ratelimit-remaining") != "59" {
		t.Errorf("rate headers: %v", resp.Header)
	}
	reqs := s.Requests()
	if len(reqs) != 7 || reqs[0].Status != 406 || reqs[2].Status != 401 || reqs[6].Status != 200 || reqs[6].RPCMethod != "initialize" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestRateLimitHTTPStyle(t *testing.T) {
	s := newFake(t, delxtest.Options{Limit: 2, Window: time.Minute})
	defer http.DefaultClient.CloseIdleConnections()
	for i := range 2 {
		if resp := post(t, s.URL(), creds(agent, token), initialize); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp := post(t, s.URL(), creds(agent, token), initialize)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d", resp.StatusCode)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 59 || ra > 60 {
		t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	if resp.Header.Get("x-ratelimit-remaining") != "0" || resp.Header.Get("x-ratelimit-limit") != "2" || resp.Header.Get("x-ratelimit-reset") == "" {
		t.Errorf("rate headers: %v", resp.Header)
	}
	// Per client: another agent has its own budget.
	if resp := post(t, s.URL(), creds("agent-b", "tok-b"), initialize); resp.StatusCode != 200 {
		t.Errorf("another agent: %d", resp.StatusCode)
	}
	if n := s.MaxInWindow(time.Minute); n != 4 {
		t.Errorf("MaxInWindow(1m) = %d, want 4", n)
	}
	if n := s.MaxInWindow(time.Nanosecond); n != 1 {
		t.Errorf("MaxInWindow(1ns) = %d, want 1", n)
	}
}

func TestRateLimitJSONRPCStyle(t *testing.T) {
	s := newFake(t, delxtest.Options{Limit: 1, RateLimitStyle: delxtest.StyleJSONRPC})
	defer http.DefaultClient.CloseIdleConnections()
	post(t, s.URL(), creds(agent, token), initialize)
	resp := post(t, s.URL(), creds(agent, token), `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("over the limit, a call: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var body struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				RetryAfter int `json:"retry_after_seconds"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.ID != 7 || body.Error.Code != -32029 || body.Error.Data.RetryAfter < 59 {
		t.Errorf("body = %+v", body)
	}
	// A notification cannot carry a JSON-RPC error: it gets the 429.
	resp = post(t, s.URL(), creds(agent, token), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the limit, a notification: %d", resp.StatusCode)
	}
}

// headers adds the credential to every request of an SDK client.
type headers struct {
	agent, token string
}

func (h headers) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set(delxtest.HeaderAgentID, h.agent)
	r.Header.Set(delxtest.HeaderAgentToken, h.token)
	if r.Header.Get("Accept") == "" {
		r.Header.Set("Accept", "application/json, text/event-stream")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an SDK client session to the fake as agent.
func connect(t *testing.T, s *delxtest.Server, agentID, tok string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   s.URL(),
		HTTPClient: &http.Client{Transport: headers{agentID, tok}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		http.DefaultClient.CloseIdleConnections()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return res, strings.Join(text, "\n")
}

var goodCapsule = map[string]any{
	"version":  "1",
	"goal":     "Migrate the billing module",
	"next":     "Swap the callsites",
	"refuted":  "Batching fails: the old client is not idempotent",
	"ttl_days": 14,
}

func TestTools(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	cs := connect(t, s, agent, token)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"close_session", "leave_hive_note", "resume_session"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v", names)
	}

	for name, tc := range map[string]struct {
		tool string
		args map[string]any
	}{
		"note without session_id":   {"leave_hive_note", map[string]any{"capsule": goodCapsule}},
		"note without capsule":      {"leave_hive_note", map[string]any{"session_id": "s1"}},
		"note with a bad capsule":   {"leave_hive_note", map[string]any{"session_id": "s1", "capsule": map[string]any{"version": "7"}}},
		"note with an extra field":  {"leave_hive_note", map[string]any{"session_id": "s1", "capsule": map[string]any{"version": "1", "mood": "ok"}}},
		"note for another agent":    {"leave_hive_note", map[string]any{"session_id": "s1", "capsule": goodCapsule, "agent_id": "agent-b"}},
		"close without session_id":  {"close_session", map[string]any{}},
		"resume without agent_id":   {"resume_session", map[string]any{}},
		"resume of another agent":   {"resume_session", map[string]any{"agent_id": "agent-b"}},
		"resume lookback 0":         {"resume_session", map[string]any{"agent_id": agent, "lookback_days": 0}},
		"resume lookback 91":        {"resume_session", map[string]any{"agent_id": agent, "lookback_days": 91}},
		"resume lookback 2.5":       {"resume_session", map[string]any{"agent_id": agent, "lookback_days": 2.5}},
		"resume lookback as string": {"resume_session", map[string]any{"agent_id": agent, "lookback_days": "30"}},
	} {
		res, text := callTool(t, cs, tc.tool, tc.args)
		if !res.IsError || text == "" {
			t.Errorf("%s: isError %v, text %q", name, res.IsError, text)
		}
	}
	if n := len(s.Notes()); n != 0 {
		t.Fatalf("%d notes stored from refused calls", n)
	}

	res, text := callTool(t, cs, "leave_hive_note", map[string]any{"session_id": "s1", "capsule": goodCapsule, "agent_id": agent})
	if res.IsError {
		t.Fatalf("good note refused: %s", text)
	}
	notes := s.Notes()
	if len(notes) != 1 {
		t.Fatalf("notes = %s", notes)
	}
	var stored map[string]any
	if err := json.Unmarshal(notes[0], &stored); err != nil || stored["goal"] != goodCapsule["goal"] {
		t.Errorf("stored note = %s", notes[0])
	}

	res, text = callTool(t, cs, "resume_session", map[string]any{"agent_id": agent, "lookback_days": 7})
	var resumed struct {
		Found        bool            `json:"found"`
		Capsule      json.RawMessage `json:"capsule"`
		SessionID    string          `json:"session_id"`
		LookbackDays int             `json:"lookback_days"`
		Age          string          `json:"age"`
	}
	if res.IsError || json.Unmarshal([]byte(text), &resumed) != nil || !resumed.Found || resumed.SessionID != "s1" || resumed.LookbackDays != 7 || resumed.Age == "" {
		t.Fatalf("resume = %s", text)
	}
	if !bytes.Equal(resumed.Capsule, notes[0]) {
		t.Errorf("resumed %s, stored %s", resumed.Capsule, notes[0])
	}
	if res.StructuredContent == nil {
		t.Errorf("resume has no structured content")
	}

	sealed := map[string]any{"version": "v1", "done": "all of it"}
	res, text = callTool(t, cs, "close_session", map[string]any{"session_id": "s1", "capsule": sealed, "reason": "done"})
	if res.IsError {
		t.Fatalf("close refused: %s", text)
	}
	_, text = callTool(t, cs, "resume_session", map[string]any{"agent_id": agent})
	if !strings.Contains(text, `"done":"all of it"`) {
		t.Errorf("resume after close = %s", text)
	}

	// Every call was recorded with what it became.
	results := map[string]int{}
	for _, c := range s.Calls() {
		results[c.Result]++
		if c.AgentID != agent || c.At.IsZero() {
			t.Errorf("call %+v", c)
		}
	}
	if results["tool_error"] != 12 || results["ok"] != 4 {
		t.Errorf("results = %v", results)
	}
}

func fakeSecret() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(3, 5))
	b := make([]byte, 36)
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	return "gh" + "p_" + string(b)
}

func TestSecretRefusedWithoutEcho(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	cs := connect(t, s, agent, token)
	secret := fakeSecret()
	c := map[string]any{"version": "1", "receipts": []string{"deploy ok", "used " + secret}}
	res, text := callTool(t, cs, "leave_hive_note", map[string]any{"session_id": "s1", "capsule": c})
	if !res.IsError {
		t.Fatal("a capsule with a credential was accepted")
	}
	if strings.Contains(text, secret) || strings.Contains(text, secret[:12]) {
		t.Fatalf("the refusal echoes the value: %s", text)
	}
	if !strings.Contains(text, "SECRET_DETECTED") || !strings.Contains(text, "receipts[1]") {
		t.Errorf("the refusal does not say what and where: %s", text)
	}
	calls := s.Calls()
	if len(calls) != 1 || calls[0].Result != "tool_error" || calls[0].Capsule != nil || strings.Contains(calls[0].Message, secret) {
		t.Errorf("call = %+v", calls[0])
	}
	if len(s.Notes()) != 0 {
		t.Error("stored")
	}
}

func TestScript(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	// The head fault only applies to tools/call: the handshake passes, and
	// the 503 behind it waits its turn.
	s.Script(delxtest.ToolError("no"), delxtest.HTTPStatus(503))
	cs := connect(t, s, agent, token)
	if s.Pending() != 2 {
		t.Fatalf("pending = %d", s.Pending())
	}
	res, text := callTool(t, cs, "resume_session", map[string]any{"agent_id": agent})
	if !res.IsError || text != "no" {
		t.Fatalf("scripted tool error: %v %q", res.IsError, text)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "resume_session", Arguments: map[string]any{"agent_id": agent}}); err == nil {
		t.Fatal("scripted 503 did not fail the call")
	}
	if s.Pending() != 0 {
		t.Fatalf("pending = %d", s.Pending())
	}
	if _, text := callTool(t, cs, "resume_session", map[string]any{"agent_id": agent}); !strings.Contains(text, `"found":false`) {
		t.Fatalf("after the script: %s", text)
	}
	var got []string
	for _, c := range s.Calls() {
		got = append(got, c.Result)
	}
	if want := []string{"fault:tool_error", "fault:http_503", "ok"}; !slices.Equal(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}
}

func TestGarbageAndReset(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	defer http.DefaultClient.CloseIdleConnections()
	s.Script(delxtest.Garbage(), delxtest.Reset())
	resp := post(t, s.URL(), creds(agent, token), initialize)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("garbage: %d %q", resp.StatusCode, b)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(initialize))
	for k, v := range creds(agent, token) {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Errorf("reset: got an answer %d", resp.StatusCode)
	}
}

func TestCloseEndsSlowRequestsAndSessions(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	cs := connect(t, s, agent, token) // an open MCP session on the server side
	_ = cs
	s.Script(delxtest.Slow(time.Minute))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(initialize))
		for k, v := range creds(agent, token) {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(60 * time.Second); s.Pending() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the server")
		}
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 30*time.Second { // far under the script's minute
		t.Errorf("Close took %v", d)
	}
	<-done
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
