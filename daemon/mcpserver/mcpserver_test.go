package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	agentpkg "github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/mcptest"
	"github.com/continuityd/continuityd/internal/ops"
)

// call is one Backend call as the fake saw it.
type call struct {
	op, agent, body string
	flag            bool // peek or sync
	seconds         int
	after           *uint64
}

// fake is a Backend that records its calls and answers what it is told.
type fake struct {
	mu     sync.Mutex
	calls  []call
	answer string // JSON, for every operation but Resume, decoded into its answer type
	err    error  // a refusal for every operation
	resume *capsule.Resume
}

func (f *fake) record(c call) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return f.answer, f.err
}

// answerAs records c and answers the fake's answer as the operation's type.
func answerAs[T any](f *fake, c call) (*T, error) {
	raw, err := f.record(c)
	if err != nil {
		return nil, err
	}
	var ans T
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &ans); err != nil {
			return nil, err
		}
	}
	return &ans, nil
}

func (f *fake) took() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fake) Resume(ctx context.Context, agent string, peek bool) (*capsule.Resume, error) {
	_, err := f.record(call{op: "resume", agent: agent, flag: peek})
	if err != nil {
		return nil, err
	}
	return f.resume, nil
}

func (f *fake) Checkpoint(ctx context.Context, agent string, body []byte, sync bool) (*agentpkg.CheckpointAnswer, error) {
	return answerAs[agentpkg.CheckpointAnswer](f, call{op: "checkpoint", agent: agent, body: string(body), flag: sync})
}

func (f *fake) Wait(ctx context.Context, agent string, seconds int, after *uint64) (*agentpkg.WaitAnswer, error) {
	return answerAs[agentpkg.WaitAnswer](f, call{op: "wait", agent: agent, seconds: seconds, after: after})
}

func (f *fake) Capsule(ctx context.Context, agent string) (*capsule.CapsuleRecord, error) {
	return answerAs[capsule.CapsuleRecord](f, call{op: "capsule", agent: agent})
}

func (f *fake) PutCapsule(ctx context.Context, agent string, body []byte) (*agentpkg.CapsuleAnswer, error) {
	return answerAs[agentpkg.CapsuleAnswer](f, call{op: "put", agent: agent, body: string(body)})
}

func (f *fake) Seal(ctx context.Context, agent string, body []byte) (*agentpkg.CapsuleAnswer, error) {
	return answerAs[agentpkg.CapsuleAnswer](f, call{op: "seal", agent: agent, body: string(body)})
}

func (f *fake) Signal(ctx context.Context, agent string, body []byte) (*agentpkg.SignalAnswer, error) {
	return answerAs[agentpkg.SignalAnswer](f, call{op: "signal", agent: agent, body: string(body)})
}

func (f *fake) SnapshotList(ctx context.Context, agent string) (*ops.SnapshotList, error) {
	return answerAs[ops.SnapshotList](f, call{op: "snapshot_list", agent: agent})
}

func (f *fake) SnapshotDiff(ctx context.Context, agent, id, against string) (*agentpkg.DiffAnswer, error) {
	return answerAs[agentpkg.DiffAnswer](f, call{op: "snapshot_diff", agent: agent, body: id + ".." + against})
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

func u64(n uint64) *uint64 { return &n }

func TestToolsListed(t *testing.T) {
	cs := connect(t, mcpserver.Options{Backend: &fake{}})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		raw, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Additional *bool                      `json:"additionalProperties"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil || schema.Type != "object" || schema.Additional == nil || *schema.Additional || schema.Properties["agent"] == nil {
			t.Errorf("%s: schema %s (%v): want a closed object with agent", tool.Name, raw, err)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"capsule_read", "capsule_seal", "capsule_write", "checkpoint", "resume", "signal", "snapshot_diff", "snapshot_list", "wait_for_event"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

// Each tool splits its arguments into the control fields (agent, and peek,
// sync, max_seconds, after) and the body the backend gets; no arguments is
// the session's agent and, where the tool has a body, {}.
func TestToolArguments(t *testing.T) {
	f := &fake{answer: `{"seq":1}`, resume: &capsule.Resume{Agent: "builder"}}
	cs := connect(t, mcpserver.Options{Backend: f, Agent: "builder"})
	for _, c := range []struct {
		tool, args string
		want       call
	}{
		{"resume", "", call{op: "resume", agent: "builder"}},
		{"resume", `{}`, call{op: "resume", agent: "builder"}},
		{"resume", `{"peek":true}`, call{op: "resume", agent: "builder", flag: true}},
		{"resume", `{"peek":"true","agent":"other"}`, call{op: "resume", agent: "other", flag: true}},
		{"resume", `{"peek":"1"}`, call{op: "resume", agent: "builder", flag: true}},
		{"resume", `{"peek":"false"}`, call{op: "resume", agent: "builder"}},
		{"resume", `null`, call{op: "resume", agent: "builder"}},
		{"checkpoint", "", call{op: "checkpoint", agent: "builder", body: `{}`}},
		{"checkpoint", `{"focus":"f","sync":true}`, call{op: "checkpoint", agent: "builder", body: `{"focus":"f"}`, flag: true}},
		{"checkpoint", `{"sync":"true","agent":"a2","decide":{"chosen":"x","because":"y"}}`,
			call{op: "checkpoint", agent: "a2", body: `{"decide":{"chosen":"x","because":"y"}}`, flag: true}},
		{"checkpoint", `{"sync":"0","focus":"f"}`, call{op: "checkpoint", agent: "builder", body: `{"focus":"f"}`}},
		{"checkpoint", `{"agent":""}`, call{op: "checkpoint", agent: "", body: `{}`}},
		{"wait_for_event", "", call{op: "wait", agent: "builder"}},
		{"wait_for_event", `{"max_seconds":5,"after":12}`, call{op: "wait", agent: "builder", seconds: 5, after: u64(12)}},
		{"wait_for_event", `{"max_seconds":"7","after":"0","agent":"x"}`, call{op: "wait", agent: "x", seconds: 7, after: u64(0)}},
		// Out of range either way: passed on capped, for the backend to refuse.
		{"wait_for_event", `{"max_seconds":18446744073709551615}`, call{op: "wait", agent: "builder", seconds: 1 << 20}},
		{"capsule_read", "", call{op: "capsule", agent: "builder"}},
		{"capsule_read", `{"agent":"x"}`, call{op: "capsule", agent: "x"}},
		{"capsule_write", `{"capsule":{"version":"1","goal":"g"}}`, call{op: "put", agent: "builder", body: `{"version":"1","goal":"g"}`}},
		{"capsule_write", `{"agent":"x","capsule":{"version":"1"}}`, call{op: "put", agent: "x", body: `{"version":"1"}`}},
		{"capsule_seal", "", call{op: "seal", agent: "builder", body: `{}`}},
		{"capsule_seal", `{"handoff_to":"next","agent":"b"}`, call{op: "seal", agent: "b", body: `{"handoff_to":"next"}`}},
		{"signal", `{"kind":"context","used_fraction":0.5}`, call{op: "signal", agent: "builder", body: `{"kind":"context","used_fraction":0.5,"via":"mcp"}`}},
		{"signal", `{"kind":"session","event":"end","via":"hook"}`, call{op: "signal", agent: "builder", body: `{"kind":"session","event":"end","via":"hook"}`}},
	} {
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		if res.IsError {
			t.Errorf("%s %s: refused: %s", c.tool, c.args, mcptest.Text(t, res))
			continue
		}
		calls := f.took()
		if len(calls) != 1 {
			t.Errorf("%s %s: backend calls %+v, want one", c.tool, c.args, calls)
			continue
		}
		got := calls[0]
		if got.op != c.want.op || got.agent != c.want.agent || got.flag != c.want.flag || got.seconds != c.want.seconds ||
			!mcptest.SameJSON(got.body, c.want.body) || (got.after == nil) != (c.want.after == nil) || (got.after != nil && *got.after != *c.want.after) {
			t.Errorf("%s %s:\n got %+v (after %v)\nwant %+v (after %v)", c.tool, c.args, got, got.after, c.want, c.want.after)
		}
	}
}

// Arguments a tool does not take, or of the wrong kind, are refused as
// INVALID_JSON before the backend is called.
func TestToolArgumentsRefused(t *testing.T) {
	f := &fake{answer: `{"seq":1}`, resume: &capsule.Resume{}}
	cs := connect(t, mcpserver.Options{Backend: f, Agent: "builder"})
	for _, c := range []struct{ tool, args, mentions string }{
		{"resume", `{"focus":"x"}`, "unknown argument"},
		{"resume", `{"peek":"maybe"}`, `"peek" must be a boolean`},
		{"resume", `{"peek":3}`, `"peek" must be a boolean`},
		{"checkpoint", `{"agent":5}`, `"agent" must be a string`},
		{"checkpoint", `{"sync":"yes please"}`, `"sync" must be a boolean`},
		{"wait_for_event", `{"max_seconds":-1}`, `"max_seconds" must be a non-negative integer`},
		{"wait_for_event", `{"max_seconds":1.5}`, `"max_seconds" must be a non-negative integer`},
		{"wait_for_event", `{"after":"x"}`, `"after" must be a non-negative integer`},
		{"wait_for_event", `{"after":true}`, `"after" must be a non-negative integer`},
		{"wait_for_event", `{"foo":1}`, `unknown argument "foo"`},
		{"capsule_read", `{"foo":1}`, `unknown argument "foo"`},
		{"capsule_write", `{}`, "capsule_write takes"},
		{"capsule_write", `{"capsule":{"version":"1"},"extra":1}`, "capsule_write takes"},
		{"capsule_seal", `{"agent":[]}`, `"agent" must be a string`},
		{"signal", `{"kind":"context","agent":{}}`, `"agent" must be a string`},
	} {
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		if !res.IsError {
			t.Errorf("%s %s: accepted, want INVALID_JSON", c.tool, c.args)
			continue
		}
		if got := mcptest.Text(t, res); !strings.HasPrefix(got, "INVALID_JSON: ") || !strings.Contains(got, c.mentions) {
			t.Errorf("%s %s: %q, want INVALID_JSON mentioning %q", c.tool, c.args, got, c.mentions)
		}
		if calls := f.took(); len(calls) != 0 {
			t.Errorf("%s %s: the backend was called: %+v", c.tool, c.args, calls)
		}
	}
}

// A refusal is a tool error with the API's code, field and message, as text
// and as structured content, whatever kind of error the backend gave.
func TestRefusalIsToolError(t *testing.T) {
	f := &fake{}
	cs := connect(t, mcpserver.Options{Backend: f})
	for _, c := range []struct {
		err        error
		text       string
		structured string
	}{
		{capsule.Refuse(capsule.CodeMotiveRequired, "decide.because", "say why in 24 characters"),
			"MOTIVE_REQUIRED (decide.because): say why in 24 characters",
			`{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why in 24 characters"}}`},
		{fmt.Errorf("wrapped: %w", capsule.Refuse(capsule.CodeNoCapsule, "", "no capsule yet")),
			"NO_CAPSULE: no capsule yet", `{"error":{"code":"NO_CAPSULE","message":"no capsule yet"}}`},
		{&client.APIError{Status: 409, Code: capsule.CodeResidencyStopped, Field: "stop", Message: "stopped"},
			"RESIDENCY_STOPPED (stop): stopped", `{"error":{"code":"RESIDENCY_STOPPED","field":"stop","message":"stopped"}}`},
		{errors.New("disk on fire"), "INTERNAL: disk on fire", `{"error":{"code":"INTERNAL","message":"disk on fire"}}`},
	} {
		f.err = c.err
		for _, tool := range []struct{ name, args string }{{"resume", ""}, {"checkpoint", `{"focus":"f"}`}, {"wait_for_event", ""},
			{"capsule_read", ""}, {"capsule_write", `{"capsule":{"version":"1"}}`}, {"capsule_seal", ""}, {"signal", `{"kind":"context"}`}} {
			res := mcptest.CallTool(t, cs, tool.name, tool.args)
			raw, _ := json.Marshal(res.StructuredContent)
			if !res.IsError || mcptest.Text(t, res) != c.text || !mcptest.SameJSON(string(raw), c.structured) {
				t.Errorf("%s, error %v:\n got %v %q %s\nwant true %q %s", tool.name, c.err, res.IsError, mcptest.Text(t, res), raw, c.text, c.structured)
			}
		}
		f.took()
	}
	f.err = fmt.Errorf("%w at /run/x.sock: connection refused", client.ErrUnreachable)
	res := mcptest.CallTool(t, cs, "checkpoint", `{"focus":"f"}`)
	if got := mcptest.Text(t, res); !res.IsError || !strings.HasPrefix(got, "DAEMON_UNREACHABLE: ") || !strings.Contains(got, "/run/x.sock") || !strings.Contains(got, "continuityd run") {
		t.Errorf("unreachable: %v %q", res.IsError, got)
	}
}

// An answer is its JSON as text and as structured content, encoded without
// HTML escapes.
func TestAnswerIsTextAndStructured(t *testing.T) {
	f := &fake{answer: `{"seq":3,"state":{"focus":"f"}}`}
	cs := connect(t, mcpserver.Options{Backend: f})
	res := mcptest.CallTool(t, cs, "checkpoint", `{"focus":"f"}`)
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError || mcptest.Text(t, res) != `{"seq":3,"state":{"focus":"f"}}` || !mcptest.SameJSON(string(raw), `{"seq":3,"state":{"focus":"f"}}`) {
		t.Errorf("checkpoint answer: %v %q %s", res.IsError, mcptest.Text(t, res), raw)
	}
	f.answer = `{"seq":4,"context":{"session_id":"a <b> & c"}}`
	res = mcptest.CallTool(t, cs, "signal", `{"kind":"context"}`)
	raw, _ = json.Marshal(res.StructuredContent)
	want := `{"seq":4,"context":{"used_fraction":null,"compactions":0,"session_id":"a <b> & c","updated_at":null}}`
	if res.IsError || mcptest.Text(t, res) != want || !mcptest.SameJSON(string(raw), want) {
		t.Errorf("signal answer: %v %q %s", res.IsError, mcptest.Text(t, res), raw)
	}
}

// resume answers markdown (bounded by ResumeLimit) and the whole resume
// document as structured content.
func TestResumeMarkdownAndDocument(t *testing.T) {
	r := &capsule.Resume{Agent: "builder", Seq: 9, Focus: "migrate the billing module",
		Receipts: []string{strings.Repeat("a", 200), strings.Repeat("b", 200)}}
	for _, limit := range []int{0, 300} {
		f := &fake{resume: r}
		cs := connect(t, mcpserver.Options{Backend: f, ResumeLimit: limit})
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
		doc, _ := json.Marshal(res.StructuredContent)
		var back capsule.Resume
		if err := json.Unmarshal(doc, &back); err != nil || back.Agent != "builder" || back.Seq != 9 || back.Focus != r.Focus || len(back.Receipts) != 2 {
			t.Errorf("structured content %s (%v), want the resume document", doc, err)
		}
	}
}

// The snapshot tools pass the agent and the ids on, and refuse anything else.
func TestSnapshotTools(t *testing.T) {
	f := &fake{answer: `{"seq":2}`}
	s := connect(t, mcpserver.Options{Backend: f, Agent: "builder"})
	ctx := context.Background()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "snapshot_list"}); err != nil || res.IsError {
		t.Fatalf("snapshot_list: %v %+v", err, res)
	}
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "snapshot_diff", Arguments: map[string]any{"id": "a1", "against": "b2", "agent": "other"}}); err != nil || res.IsError {
		t.Fatalf("snapshot_diff: %v %+v", err, res)
	}
	got := f.took()
	if len(got) != 2 || got[0].op != "snapshot_list" || got[0].agent != "builder" ||
		got[1].op != "snapshot_diff" || got[1].agent != "other" || got[1].body != "a1..b2" {
		t.Fatalf("calls %+v", got)
	}
	for _, bad := range []map[string]any{{"id": 3}, {"path": "x"}} {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "snapshot_diff", Arguments: bad})
		if err != nil || !res.IsError {
			t.Fatalf("snapshot_diff %v accepted: %v %+v", bad, err, res)
		}
	}
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "snapshot_list", Arguments: map[string]any{"x": 1}}); err != nil || !res.IsError {
		t.Fatalf("snapshot_list with an unknown argument: %v %+v", err, res)
	}
	if len(f.took()) != 0 {
		t.Fatal("a refused call reached the backend")
	}
}

// A tool's arguments are as strict as any body: a key given twice (a
// control field or a body field) is refused with the guard's code and
// field, and the backend is not called.
func TestArgumentsRefuseDuplicateKeys(t *testing.T) {
	f := &fake{answer: `{"seq":1}`}
	cs := connect(t, mcpserver.Options{Backend: f})
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
		if calls := f.took(); len(calls) != 0 {
			t.Errorf("%s %s: the backend was called: %+v", tc.tool, tc.args, calls)
		}
	}
}
