package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/testkit/mcptest"
	"github.com/continuityd/continuityd/internal/testkit/socktest"
)

// standIn answers on a real Unix socket as the daemon's API would, with
// what the test sets: a status and a body for every request but a
// resume's, which gets resume's document. It records each request.
type standIn struct {
	mu     sync.Mutex
	status int
	answer string
	resume string
	take   func() []socktest.Request
	client *client.Client
}

func newStandIn(t testing.TB) *standIn {
	s := &standIn{status: http.StatusOK, answer: `{"seq":1}`, resume: `{"agent":"builder","seq":2,"focus":"the goal"}`}
	sock, take := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		status, answer := s.status, s.answer
		if status == http.StatusOK && r.URL.Path == ops.Resume.Op().Path {
			answer = s.resume
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	})
	s.take = take
	s.client = client.New(sock)
	t.Cleanup(s.client.Close)
	return s
}

// answers sets what every request but a resume gets.
func (s *standIn) answers(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.answer = status, body
}

// connect serves mcpserver.New(o) to an in-memory MCP client session.
func connect(t *testing.T, o mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// The tools are the table's: one for each operation that names one (the
// SDK lists them by name), each with its title and description and a
// closed input schema that takes agent.
func TestToolsAreTheTables(t *testing.T) {
	cs := connect(t, mcpserver.Options{Client: newStandIn(t).client})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []*ops.Tool
	for _, o := range ops.Table() {
		if o.MCP != nil {
			want = append(want, o.MCP)
		}
	}
	slices.SortFunc(want, func(a, b *ops.Tool) int { return strings.Compare(a.Name, b.Name) })
	if len(res.Tools) != len(want) {
		t.Fatalf("%d tools, the table names %d", len(res.Tools), len(want))
	}
	for i, tool := range res.Tools {
		w := want[i]
		if tool.Name != w.Name || tool.Title != w.Title || tool.Description != w.Description {
			t.Errorf("tool %d: %s %q %q, want the table's %s %q %q", i, tool.Name, tool.Title, tool.Description, w.Name, w.Title, w.Description)
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Additional *bool                      `json:"additionalProperties"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil || schema.Type != "object" || schema.Additional == nil || *schema.Additional || schema.Properties["agent"] == nil {
			t.Errorf("%s: schema %s (%v): want a closed object with agent", tool.Name, raw, err)
		}
	}
}

// Each tool's arguments become its operation's request: agent (the
// session's when left out) and the parameters the tool takes in the query
// or the path, the rest the body; no arguments is the session's agent and,
// where the operation has a body, {}.
func TestToolArgumentsAreTheRequest(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client, Agent: "builder"})
	for _, c := range []struct {
		tool, args string
		want       socktest.Request
	}{
		{"resume", "", socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder"}},
		{"resume", `{}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder"}},
		{"resume", `null`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder"}},
		{"resume", `{"peek":true}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder&peek=true"}},
		{"resume", `{"peek":"true","agent":"other"}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=other&peek=true"}},
		{"resume", `{"peek":"1"}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder&peek=true"}},
		{"resume", `{"peek":"false"}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder"}},
		{"checkpoint", "", socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder", Body: `{}`}},
		{"checkpoint", `{"focus":"f","sync":true}`, socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder&sync=true", Body: `{"focus":"f"}`}},
		{"checkpoint", `{"sync":"true","agent":"a2","decide":{"chosen":"x","because":"y"}}`,
			socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=a2&sync=true", Body: `{"decide":{"chosen":"x","because":"y"}}`}},
		{"checkpoint", `{"sync":"0","focus":"f"}`, socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder", Body: `{"focus":"f"}`}},
		{"checkpoint", `{"agent":""}`, socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Body: `{}`}},
		{"wait_for_event", "", socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "agent=builder"}},
		{"wait_for_event", `{"max_seconds":5,"after":12}`, socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "after=12&agent=builder&max_seconds=5"}},
		{"wait_for_event", `{"max_seconds":"7","after":"0","agent":"x"}`, socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "after=0&agent=x&max_seconds=7"}},
		// Out of range: passed on, for the API to refuse as it refuses the
		// same query.
		{"wait_for_event", `{"max_seconds":18446744073709551615}`, socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "agent=builder&max_seconds=18446744073709551615"}},
		{"capsule_read", "", socktest.Request{Method: "GET", Path: "/v1/capsule", Query: "agent=builder"}},
		{"capsule_read", `{"agent":"x"}`, socktest.Request{Method: "GET", Path: "/v1/capsule", Query: "agent=x"}},
		{"capsule_write", `{"capsule":{"version":"1","goal":"g"}}`, socktest.Request{Method: "PUT", Path: "/v1/capsule", Query: "agent=builder", Body: `{"version":"1","goal":"g"}`}},
		{"capsule_write", `{"agent":"x","capsule":{"version":"1"}}`, socktest.Request{Method: "PUT", Path: "/v1/capsule", Query: "agent=x", Body: `{"version":"1"}`}},
		{"capsule_seal", "", socktest.Request{Method: "POST", Path: "/v1/capsule/seal", Query: "agent=builder", Body: `{}`}},
		{"capsule_seal", `{"handoff_to":"next","agent":"b"}`, socktest.Request{Method: "POST", Path: "/v1/capsule/seal", Query: "agent=b", Body: `{"handoff_to":"next"}`}},
		{"signal", `{"kind":"context","used_fraction":0.5}`, socktest.Request{Method: "POST", Path: "/v1/signals", Query: "agent=builder", Body: `{"kind":"context","used_fraction":0.5,"via":"mcp"}`}},
		{"signal", `{"kind":"session","event":"end","via":"hook"}`, socktest.Request{Method: "POST", Path: "/v1/signals", Query: "agent=builder", Body: `{"kind":"session","event":"end","via":"hook"}`}},
		// An unknown field of a body is the API's to refuse, as for any body.
		{"checkpoint", `{"focus":"f","colour":"red"}`, socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder", Body: `{"focus":"f","colour":"red"}`}},
		{"snapshot_list", "", socktest.Request{Method: "GET", Path: "/v1/snapshots", Query: "agent=builder"}},
		{"snapshot_diff", "", socktest.Request{Method: "GET", Path: "/v1/snapshots/latest", Query: "agent=builder&diff=1"}},
		{"snapshot_diff", `{"id":""}`, socktest.Request{Method: "GET", Path: "/v1/snapshots/latest", Query: "agent=builder&diff=1"}},
		{"snapshot_diff", `{"id":"a1/b","against":"b2","agent":"other"}`, socktest.Request{Method: "GET", Path: "/v1/snapshots/a1/b", Query: "against=b2&agent=other&diff=1"}},
	} {
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		if res.IsError {
			t.Errorf("%s %s: refused: %s", c.tool, c.args, mcptest.Text(t, res))
			continue
		}
		got := s.take()
		if len(got) != 1 || got[0].Method != c.want.Method || got[0].Path != c.want.Path || got[0].Query != c.want.Query || !mcptest.SameJSON(got[0].Body, c.want.Body) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.tool, c.args, got, c.want)
		}
	}
}

// Arguments a tool does not take, or of the wrong kind, are refused as
// INVALID_JSON before anything is sent.
func TestToolArgumentsRefused(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client, Agent: "builder"})
	for _, c := range []struct{ tool, args, mentions string }{
		{"resume", `{"focus":"x"}`, `unknown argument "focus"; resume takes agent, peek`},
		{"resume", `{"peek":"maybe"}`, `"peek" must be a boolean`},
		{"resume", `{"peek":3}`, `"peek" must be a boolean`},
		{"resume", `[1]`, "must be a JSON object"},
		{"checkpoint", `{"agent":5}`, `"agent" must be a string`},
		{"checkpoint", `{"sync":"yes please"}`, `"sync" must be a boolean`},
		{"wait_for_event", `{"max_seconds":-1}`, `"max_seconds" must be a non-negative integer`},
		{"wait_for_event", `{"max_seconds":1.5}`, `"max_seconds" must be a non-negative integer`},
		{"wait_for_event", `{"after":"x"}`, `"after" must be a non-negative integer`},
		{"wait_for_event", `{"after":true}`, `"after" must be a non-negative integer`},
		{"wait_for_event", `{"foo":1}`, `unknown argument "foo"`},
		{"capsule_read", `{"foo":1}`, `unknown argument "foo"`},
		{"capsule_write", `{}`, `capsule_write takes {"capsule": {…}} and agent`},
		{"capsule_write", `{"capsule":{"version":"1"},"extra":1}`, "capsule_write takes"},
		{"capsule_seal", `{"agent":[]}`, `"agent" must be a string`},
		{"signal", `{"kind":"context","agent":{}}`, `"agent" must be a string`},
		{"snapshot_diff", `{"id":3}`, `"id" must be a string`},
		{"snapshot_diff", `{"path":"x"}`, `unknown argument "path"`},
		{"snapshot_list", `{"x":1}`, `unknown argument "x"`},
	} {
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		if !res.IsError {
			t.Errorf("%s %s: accepted, want INVALID_JSON", c.tool, c.args)
			continue
		}
		if got := mcptest.Text(t, res); !strings.HasPrefix(got, "INVALID_JSON: ") || !strings.Contains(got, c.mentions) {
			t.Errorf("%s %s: %q, want INVALID_JSON mentioning %q", c.tool, c.args, got, c.mentions)
		}
		if seen := s.take(); len(seen) != 0 {
			t.Errorf("%s %s: the daemon was asked %+v", c.tool, c.args, seen)
		}
	}
}

// A refusal is a tool error with the API's code, field and message, as
// text and as structured content; a daemon that cannot be reached is
// DAEMON_UNREACHABLE, naming where it was looked for.
func TestRefusalIsToolError(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client})
	for _, c := range []struct {
		status           int
		body             string
		text, structured string
	}{
		{400, `{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why in 24 characters"}}`,
			"MOTIVE_REQUIRED (decide.because): say why in 24 characters",
			`{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why in 24 characters"}}`},
		{404, `{"error":{"code":"NO_CAPSULE","message":"no capsule yet"}}`, "NO_CAPSULE: no capsule yet", `{"error":{"code":"NO_CAPSULE","message":"no capsule yet"}}`},
		{502, `bad gateway`, "HTTP_502: bad gateway", `{"error":{"code":"HTTP_502","message":"bad gateway"}}`},
	} {
		s.answers(c.status, c.body)
		for _, tool := range []struct{ name, args string }{{"checkpoint", `{"focus":"f"}`}, {"wait_for_event", ""},
			{"capsule_read", ""}, {"capsule_write", `{"capsule":{"version":"1"}}`}, {"capsule_seal", ""}, {"signal", `{"kind":"context"}`}} {
			res := mcptest.CallTool(t, cs, tool.name, tool.args)
			raw, _ := json.Marshal(res.StructuredContent)
			if !res.IsError || mcptest.Text(t, res) != c.text || !mcptest.SameJSON(string(raw), c.structured) {
				t.Errorf("%s, answer %d %s:\n got %v %q %s\nwant true %q %s", tool.name, c.status, c.body, res.IsError, mcptest.Text(t, res), raw, c.text, c.structured)
			}
		}
	}
	gone := filepath.Join(t.TempDir(), "gone.sock")
	cs = connect(t, mcpserver.Options{Client: client.New(gone)})
	res := mcptest.CallTool(t, cs, "checkpoint", `{"focus":"f"}`)
	if got := mcptest.Text(t, res); !res.IsError || !strings.HasPrefix(got, "DAEMON_UNREACHABLE: ") || !strings.Contains(got, gone) || !strings.Contains(got, "continuityd run") {
		t.Errorf("unreachable: %v %q", res.IsError, got)
	}
}

// An answer is the API's JSON as it came, as text and as structured
// content.
func TestAnswerIsTextAndStructured(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client})
	for _, c := range []struct{ tool, args, answer string }{
		{"checkpoint", `{"focus":"f"}`, `{"seq":3,"state":{"focus":"f"}}`},
		{"signal", `{"kind":"context"}`, `{"seq":4,"context":{"session_id":"a <b> & c"}}`},
	} {
		s.answers(http.StatusOK, c.answer+"\n")
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		raw, _ := json.Marshal(res.StructuredContent)
		if res.IsError || mcptest.Text(t, res) != c.answer || !mcptest.SameJSON(string(raw), c.answer) {
			t.Errorf("%s answer: %v %q %s, want %s", c.tool, res.IsError, mcptest.Text(t, res), raw, c.answer)
		}
	}
}

// resume answers markdown (bounded by ResumeLimit) and the whole resume
// document as structured content.
func TestResumeMarkdownAndDocument(t *testing.T) {
	r := &capsule.Resume{Agent: "builder", Seq: 9, Focus: "migrate the billing module",
		Receipts: []string{strings.Repeat("a", 200), strings.Repeat("b", 200)}}
	doc, _ := json.Marshal(r)
	for _, limit := range []int{0, 300} {
		s := newStandIn(t)
		s.resume = string(doc)
		cs := connect(t, mcpserver.Options{Client: s.client, ResumeLimit: limit})
		res := mcptest.CallTool(t, cs, "resume", "")
		want := r.Markdown(10000)
		if limit != 0 {
			want = r.Markdown(limit)
		}
		if res.IsError || mcptest.Text(t, res) != want {
			t.Errorf("limit %d: text %q, want %q", limit, mcptest.Text(t, res), want)
		}
		if limit == 300 && !strings.Contains(mcptest.Text(t, res), "left out") {
			t.Errorf("limit 300 leaves the receipts out: %q", mcptest.Text(t, res))
		}
		got, _ := json.Marshal(res.StructuredContent)
		if !mcptest.SameJSON(string(got), string(doc)) {
			t.Errorf("structured content %s, want the resume document %s", got, doc)
		}
	}
	// A resume this server does not understand is said to be one.
	s := newStandIn(t)
	s.resume = `{"seq":"nine"}`
	cs := connect(t, mcpserver.Options{Client: s.client})
	if res := mcptest.CallTool(t, cs, "resume", ""); !res.IsError || !strings.Contains(mcptest.Text(t, res), "another version?") {
		t.Errorf("a foreign resume: %v %q", res.IsError, mcptest.Text(t, res))
	}
}

// A tool's arguments are as strict as any body: a key given twice (an
// argument or a field of the body) is refused with the guard's code and
// field, and nothing is sent.
func TestArgumentsRefuseDuplicateKeys(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client})
	for _, tc := range []struct{ tool, args, field string }{
		{"checkpoint", `{"focus":"a","focus":"b"}`, "focus"},
		{"checkpoint", `{"sync":true,"sync":false,"focus":"a"}`, "sync"},
		{"signal", `{"kind":"context","kind":"session"}`, "kind"},
		{"capsule_seal", `{"agent":"a","agent":"b"}`, "agent"},
	} {
		res := mcptest.CallTool(t, cs, tc.tool, tc.args)
		raw, _ := json.Marshal(res.StructuredContent)
		if got := mcptest.Text(t, res); !res.IsError || !strings.HasPrefix(got, "INVALID_JSON ("+tc.field+"): duplicate key") {
			t.Errorf("%s %s: %v %q %s", tc.tool, tc.args, res.IsError, got, raw)
		}
		if seen := s.take(); len(seen) != 0 {
			t.Errorf("%s %s: the daemon was asked %+v", tc.tool, tc.args, seen)
		}
	}
}

// Every tool's call goes through the client the server was given, and
// only through it: with no daemon there, each is refused as unreachable,
// none answered by anything else.
func TestEveryToolCallsItsOperation(t *testing.T) {
	s := newStandIn(t)
	cs := connect(t, mcpserver.Options{Client: s.client, Agent: "builder"})
	args := map[string]string{"capsule_write": `{"capsule":{"version":"1"}}`, "signal": `{"kind":"context"}`}
	for _, o := range ops.Table() {
		if o.MCP == nil {
			continue
		}
		res := mcptest.CallTool(t, cs, o.MCP.Name, args[o.MCP.Name])
		seen := s.take()
		if res.IsError || len(seen) != 1 || seen[0].Method != o.Method || !slices.Contains([]string{o.Path, strings.Replace(o.Path, "{id}", ops.Latest, 1)}, seen[0].Path) {
			t.Errorf("tool %s: %v %s, asked %+v, want one %s", o.MCP.Name, res.IsError, fmt.Sprint(res.Content), seen, o.Pattern())
		}
	}
}
