package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/internal/testkit/guardtest"
	"github.com/continuityd/continuityd/upstream/local"
)

// runtime serves one real agent; any other name is UNKNOWN_AGENT.
type runtime struct {
	ag *agent.Agent
	g  *guard.Guard
}

func (r runtime) Agent(name, cwd string) (*agent.Agent, *guard.Guard, error) {
	if name == "" || name == r.ag.Name() {
		return r.ag, r.g, nil
	}
	return nil, nil, capsule.Refuse(capsule.CodeUnknownAgent, "agent", "no agent of that name; this daemon serves %s", r.ag.Name())
}

func (r runtime) AgentConfig(name string) (config.Agent, bool) {
	if name == r.ag.Name() {
		return r.ag.Config(), true
	}
	return config.Agent{}, false
}

func (r runtime) Status() api.Status {
	return api.Status{Version: "test", PID: 42, Agents: []api.AgentStatus{{Name: r.ag.Name(), Seq: r.ag.Store().Resume().Seq}}}
}

type noObserver struct{}

func (noObserver) Delivery(string, string, time.Duration) {}
func (noObserver) Accepted(string, string)                {}
func (noObserver) Signal(string, string)                  {}

// testAPI is the API over one real agent, "builder", shipping to the
// local archive, served by httptest (for /mcp) and called directly.
type testAPI struct {
	h   http.Handler
	srv *httptest.Server
	ag  *agent.Agent
}

func newTestAPI(t *testing.T) *testAPI {
	t.Helper()
	rt := newTestRuntime(t)
	h := api.New(api.Options{Runtime: rt, Version: "test", Stopping: t.Context()}).Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testAPI{h: h, srv: srv, ag: rt.ag}
}

// newTestRuntime starts one real agent, "builder", shipping to the local
// archive, stopped at the test's end.
func newTestRuntime(t testing.TB) runtime {
	t.Helper()
	dir, err := os.MkdirTemp("", "api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Daemon.StateDir = filepath.Join(dir, "state")
	cfg.Agents = []config.Agent{{Name: "builder", Upstreams: []string{"local"}}}
	if err := statefiles.Prepare(cfg.Daemon.StateDir, statefiles.ModesFor(cfg.Daemon.SocketPerm())); err != nil {
		t.Fatal(err)
	}
	g, err := guardtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	uc, _ := cfg.UpstreamFor("local")
	archive := local.New("local", cfg.AgentDir)
	ups := map[string]*agent.Upstream{"local": {Cfg: uc, Client: archive, Limiter: rate.NewLimiter(rate.Inf, 1)}}
	ag, err := agent.Open(agent.Options{Config: cfg.Agents[0], Dir: cfg.AgentDir("builder"), Modes: statefiles.ModesFor(cfg.Daemon.SocketPerm()),
		Upstreams: ups, ResumeTimeout: cfg.Outbox.ResumeTimeout.Duration, Guard: g, Logger: slog.New(slog.DiscardHandler), Observer: noObserver{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ag.Start(ctx)
	t.Cleanup(func() {
		stop()
		if err := ag.Stop(); err != nil {
			t.Error(err)
		}
		archive.Close()
	})
	return runtime{ag, g}
}

// do sends one request to the handler and returns the status and body.
func (ta *testAPI) do(t *testing.T, method, target string, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	ta.h.ServeHTTP(rec, httptest.NewRequest(method, target, rd))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, target, rec.Code, rec.Body, err)
	}
	return rec.Code, rec.Header(), v
}

// mcpSession opens an MCP session at /mcp (its default agent from ?agent=).
func (ta *testAPI) mcpSession(t *testing.T, query string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ta.srv.URL + "/mcp" + query, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// tool calls an MCP tool and returns whether it was refused and its
// structured content.
func tool(t *testing.T, cs *mcp.ClientSession, name, args string) (bool, map[string]any) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s %s: structured content %s: %v", name, args, raw, err)
	}
	return res.IsError, v
}

func errorOf(v map[string]any) (code, field string) {
	e, _ := v["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

func seqOf(v map[string]any) float64 {
	n, _ := v["seq"].(float64)
	return n
}

// The same operation through either door gives the same answer: writes
// take the next seq whichever door they come through, and a refusal has
// the same code and field.
func TestHTTPAndMCPAgree(t *testing.T) {
	ta := newTestAPI(t)
	cs := ta.mcpSession(t, "?agent=builder")

	// Writes alternate between the doors; the seqs run on.
	writes := []struct {
		path, method, tool, body string
	}{
		{"/v1/continuity/checkpoint", "POST", "checkpoint", `{"focus":"migrate the billing module"}`},
		{"/v1/continuity/checkpoint", "POST", "checkpoint", `{"working_state":{"next_action":"swap the callsites"}}`},
		{"/v1/signals", "POST", "signal", `{"kind":"context","used_fraction":0.5}`},
		{"/v1/capsule", "PUT", "capsule_write", `{"version":"1","goal":"the goal"}`},
		{"/v1/capsule/seal", "POST", "capsule_seal", `{"handoff_to":"reviewer"}`},
	}
	want := float64(0)
	for _, w := range writes {
		want++
		status, _, v := ta.do(t, w.method, w.path+"?agent=builder", w.body)
		if status != 200 || seqOf(v) != want {
			t.Fatalf("HTTP %s %s: %d seq %v, want 200 seq %v: %v", w.method, w.path, status, seqOf(v), want, v)
		}
		args := w.body
		if w.tool == "capsule_write" {
			args = `{"capsule":` + w.body + `}`
		}
		want++
		refused, mv := tool(t, cs, w.tool, args)
		if refused || seqOf(mv) != want {
			t.Fatalf("MCP %s: refused %v seq %v, want seq %v: %v", w.tool, refused, seqOf(mv), want, mv)
		}
		// The same shape of answer: the same keys.
		if !sameKeys(v, mv) {
			t.Errorf("%s: HTTP answer keys %v, MCP %v", w.tool, keys(v), keys(mv))
		}
	}
	if got := ta.ag.Store().Resume().Seq; got != uint64(want) {
		t.Errorf("the store is at seq %d, want %v", got, want)
	}

	// Reads agree.
	_, _, hv := ta.do(t, "GET", "/v1/continuity?peek=1", "")
	_, mv := tool(t, cs, "resume", `{"peek":true}`)
	for _, k := range []string{"agent", "seq", "focus", "working_state", "capsule", "receipts"} {
		if !reflect.DeepEqual(hv[k], mv[k]) {
			t.Errorf("resume %s: HTTP %v, MCP %v", k, hv[k], mv[k])
		}
	}
	_, _, hv = ta.do(t, "GET", "/v1/capsule", "")
	_, mv = tool(t, cs, "capsule_read", "")
	if !reflect.DeepEqual(hv, mv) || hv["sealed"] != true {
		t.Errorf("capsule: HTTP %v, MCP %v", hv, mv)
	}
	_, _, hv = ta.do(t, "GET", "/v1/continuity/wait?after=0&max_seconds=1", "")
	_, mv = tool(t, cs, "wait_for_event", `{"after":0,"max_seconds":1}`)
	if !reflect.DeepEqual(hv, mv) || hv["woke"] != "event" {
		t.Errorf("wait after 0: HTTP %v, MCP %v", hv, mv)
	}

	// Refusals agree, and store nothing.
	for _, r := range []struct {
		method, path, tool, body, args string
		status                         int
		code, field                    string
	}{
		{"POST", "/v1/continuity/checkpoint", "checkpoint", `{"decide":{"chosen":"x","because":"too short"}}`, "", 400, capsule.CodeMotiveRequired, "decide.because"},
		{"POST", "/v1/continuity/checkpoint", "checkpoint", `{}`, "", 400, capsule.CodeEmptyCheckpoint, ""},
		{"POST", "/v1/continuity/checkpoint", "checkpoint", `{"focus":"x","surprise":1}`, "", 400, capsule.CodeUnknownField, ""},
		{"POST", "/v1/signals", "signal", `{"kind":"weather"}`, "", 400, capsule.CodeInvalidSignal, ""},
		{"PUT", "/v1/capsule", "capsule_write", `{"version":"2"}`, `{"capsule":{"version":"2"}}`, 400, capsule.CodeInvalidCapsule, ""},
		{"POST", "/v1/capsule/seal", "capsule_seal", `{"goal":"token ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"}`, "", 400, capsule.CodeSecretDetected, ""},
		{"GET", "/v1/continuity/wait?max_seconds=91", "wait_for_event", "", `{"max_seconds":91}`, 400, capsule.CodeInvalidQuery, "max_seconds"},
		{"POST", "/v1/continuity/checkpoint?agent=nobody", "checkpoint", `{"focus":"x"}`, `{"focus":"x","agent":"nobody"}`, 404, capsule.CodeUnknownAgent, "agent"},
		{"GET", "/v1/continuity?agent=nobody", "resume", "", `{"agent":"nobody"}`, 404, capsule.CodeUnknownAgent, "agent"},
	} {
		status, _, hv := ta.do(t, r.method, r.path, r.body)
		args := r.args
		if args == "" {
			args = r.body
		}
		refused, mv := tool(t, cs, r.tool, args)
		hc, hf := errorOf(hv)
		mc, mf := errorOf(mv)
		if status != r.status || hc != r.code || !refused || mc != hc || mf != hf || (r.field != "" && hf != r.field) {
			t.Errorf("%s %s: HTTP %d %s (%s), MCP refused %v %s (%s); want %d %s (%s)", r.method, r.path, status, hc, hf, refused, mc, mf, r.status, r.code, r.field)
		}
	}
	if got := ta.ag.Store().Resume().Seq; got != uint64(want) {
		t.Errorf("refusals stored something: seq %d, want %v", got, want)
	}
}

func sameKeys(a, b map[string]any) bool { return reflect.DeepEqual(keys(a), keys(b)) }

func keys(m map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// Each route of the local API, with its answers and refusals.
func TestRoutes(t *testing.T) {
	ta := newTestAPI(t)
	// Nothing saved yet.
	if status, _, v := ta.do(t, "GET", "/v1/capsule", ""); status != 404 || v["error"].(map[string]any)["code"] != capsule.CodeNoCapsule {
		t.Errorf("GET /v1/capsule before any: %d %v", status, v)
	}
	status, _, v := ta.do(t, "POST", "/v1/continuity/checkpoint", `{"focus":"f"}`)
	if status != 200 || seqOf(v) != 1 || v["state"].(map[string]any)["focus"] != "f" || v["sync"] != nil {
		t.Errorf("checkpoint: %d %v", status, v)
	}
	// ?sync=1 waits for the local archive and says so.
	status, _, v = ta.do(t, "POST", "/v1/continuity/checkpoint?sync=1", `{"focus":"g"}`)
	sync, _ := v["sync"].([]any)
	if status != 200 || seqOf(v) != 2 || len(sync) != 1 {
		t.Fatalf("checkpoint?sync=1: %d %v", status, v)
	}
	if up := sync[0].(map[string]any); up["name"] != "local" || up["delivered"] != true || up["state"] != capsule.UpstreamOK {
		t.Errorf("sync: %v", up)
	}
	if status, _, v := ta.do(t, "POST", "/v1/continuity/checkpoint?sync=maybe", `{"focus":"g"}`); status != 400 || !isError(v, capsule.CodeInvalidQuery, "sync") {
		t.Errorf("?sync=maybe: %d %v", status, v)
	}
	status, _, v = ta.do(t, "GET", "/v1/continuity", "")
	if status != 200 || v["agent"] != "builder" || v["focus"] != "g" || seqOf(v) != 2 {
		t.Errorf("resume: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "GET", "/v1/continuity?peek=perhaps", ""); status != 400 || !isError(v, capsule.CodeInvalidQuery, "peek") {
		t.Errorf("?peek=perhaps: %d %v", status, v)
	}
	for _, q := range []string{"max_seconds=0", "max_seconds=abc", "max_seconds=-3", "max_seconds=91"} {
		if status, _, v := ta.do(t, "GET", "/v1/continuity/wait?"+q, ""); status != 400 || !isError(v, capsule.CodeInvalidQuery, "max_seconds") {
			t.Errorf("wait?%s: %d %v", q, status, v)
		}
	}
	if status, _, v := ta.do(t, "GET", "/v1/continuity/wait?after=x", ""); status != 400 || !isError(v, capsule.CodeInvalidQuery, "after") {
		t.Errorf("wait?after=x: %d %v", status, v)
	}
	// What happened since cursor 0 comes at once.
	status, _, v = ta.do(t, "GET", "/v1/continuity/wait?max_seconds=1&after=0", "")
	if evs, _ := v["events"].([]any); status != 200 || v["woke"] != "event" || len(evs) < 2 || v["cursor"].(float64) < 2 {
		t.Errorf("wait after 0: %d %v", status, v)
	}
	status, _, v = ta.do(t, "PUT", "/v1/capsule", `{"version":"1","goal":"the goal","receipts":["repo@a1b2c3d"]}`)
	if c, _ := v["capsule"].(map[string]any); status != 200 || seqOf(v) != 3 || c["sealed"] != false || c["capsule"].(map[string]any)["goal"] != "the goal" {
		t.Errorf("PUT /v1/capsule: %d %v", status, v)
	}
	status, _, v = ta.do(t, "POST", "/v1/capsule/seal", "")
	if c, _ := v["capsule"].(map[string]any); status != 200 || seqOf(v) != 4 || c["sealed"] != true || c["capsule"].(map[string]any)["goal"] != "g" {
		t.Errorf("seal (focus → goal): %d %v", status, v)
	}
	if status, _, v := ta.do(t, "POST", "/v1/capsule/seal", `{"nonsense":1}`); status != 400 || !isError(v, capsule.CodeInvalidCapsule, "nonsense") {
		t.Errorf("seal with an unknown field: %d %v", status, v)
	}
	status, _, v = ta.do(t, "GET", "/v1/capsule", "")
	if status != 200 || v["sealed"] != true || seqOf(v) != 4 {
		t.Errorf("GET /v1/capsule: %d %v", status, v)
	}
	status, _, v = ta.do(t, "POST", "/v1/signals", `{"kind":"context","used_fraction":0.83}`)
	if ctx, _ := v["context"].(map[string]any); status != 200 || seqOf(v) != 5 || ctx["used_fraction"] != 0.83 {
		t.Errorf("signal: %d %v", status, v)
	}

	// The dead letter: empty; an upstream the agent does not ship to is
	// refused, its name not repeated.
	if status, _, v := ta.do(t, "GET", "/v1/deadletter", ""); status != 200 || !reflect.DeepEqual(v["entries"], []any{}) {
		t.Errorf("dead letter: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "GET", "/v1/deadletter?upstream=local", ""); status != 200 || !reflect.DeepEqual(v["entries"], []any{}) {
		t.Errorf("dead letter of local: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "GET", "/v1/deadletter?upstream=nowhere", ""); status != 404 || !isError(v, capsule.CodeNotFound, "upstream") {
		t.Errorf("dead letter of an unknown upstream: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "POST", "/v1/deadletter/retry", `{"upstream":"local","seq":0}`); status != 200 || v["retried"] != float64(0) {
		t.Errorf("retry: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "POST", "/v1/deadletter/discard", `{"upstream":"local","seq":0}`); status != 200 || v["discarded"] != float64(0) {
		t.Errorf("discard all: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "POST", "/v1/deadletter/discard", `{"upstream":"local","seq":3}`); status != 404 || !isError(v, capsule.CodeNotFound, "seq") {
		t.Errorf("discard of a seq not in the dead letter: %d %v", status, v)
	}
	status, _, v = ta.do(t, "POST", "/v1/deadletter/discard", `{"upstream":"sk_live_pasted_by_mistake","seq":1}`)
	if !isError(v, capsule.CodeInvalidField, "upstream") || status != 400 || strings.Contains(v["error"].(map[string]any)["message"].(string), "sk_live") {
		t.Errorf("discard from an unknown upstream: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "POST", "/v1/deadletter/retry", `{"upstream":"local","extra":1}`); status != 400 || !isError(v, capsule.CodeUnknownField, "extra") {
		t.Errorf("retry with an unknown field: %d %v", status, v)
	}

	status, _, v = ta.do(t, "GET", "/v1/status", "")
	if agents, _ := v["agents"].([]any); status != 200 || v["version"] != "test" || len(agents) != 1 || agents[0].(map[string]any)["seq"] != float64(5) {
		t.Errorf("status: %d %v", status, v)
	}
	if status, _, v := ta.do(t, "GET", "/healthz", ""); status != 200 || v["ok"] != true || v["version"] != "test" {
		t.Errorf("healthz: %d %v", status, v)
	}
}

func isError(v map[string]any, code, field string) bool {
	c, f := errorOf(v)
	return c == code && f == field
}

// Paths and methods that are not the API's, and bodies over the limit, get
// the API's error shape.
func TestNotFoundMethodAndBodyLimits(t *testing.T) {
	ta := newTestAPI(t)
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/v1/continuity", "GET"},
		{"GET", "/v1/continuity/checkpoint", "POST"},
		{"DELETE", "/v1/capsule", "GET, PUT"},
		{"GET", "/v1/deadletter/retry", "POST"},
		{"POST", "/healthz", "GET"},
	} {
		status, h, v := ta.do(t, c.method, c.path, "")
		if status != 405 || h.Get("Allow") != c.allow || !isError(v, capsule.CodeMethodNotAllowed, "") {
			t.Errorf("%s %s: %d Allow %q %v", c.method, c.path, status, h.Get("Allow"), v)
		}
	}
	// GET /metrics: the API was given no Metrics handler.
	for _, p := range []string{"/", "/v2/continuity", "/v1/continuity/checkpoint/x", "/metrics"} {
		if status, _, v := ta.do(t, "GET", p, ""); status != 404 || !isError(v, capsule.CodeNotFound, "") {
			t.Errorf("GET %s: %d %v", p, status, v)
		}
	}
	big := `{"focus":"` + strings.Repeat("a", guard.MaxBodyBytes) + `"}`
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/continuity/checkpoint"}, {"PUT", "/v1/capsule"}, {"POST", "/v1/capsule/seal"},
		{"POST", "/v1/signals"}, {"POST", "/v1/deadletter/retry"},
	} {
		if status, _, v := ta.do(t, c.method, c.path, big); status != 413 || !isError(v, capsule.CodeBodyTooLarge, "") {
			t.Errorf("%s %s with %d bytes: %d %v", c.method, c.path, len(big), status, v)
		}
	}
	// /mcp has room for the JSON-RPC envelope, and the same limit past it.
	huge := bytes.Repeat([]byte("a"), guard.MaxBodyBytes+8<<10)
	req, _ := http.NewRequest("POST", ta.srv.URL+"/mcp", bytes.NewReader(huge))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	if resp.StatusCode != 413 || !isError(v, capsule.CodeBodyTooLarge, "") {
		t.Errorf("POST /mcp with %d bytes: %d %v", len(huge), resp.StatusCode, v)
	}
	if ta.ag.Store().Resume().Seq != 0 {
		t.Errorf("a refused body stored something: seq %d", ta.ag.Store().Resume().Seq)
	}
}
