package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/internal/ops"
)

// mcpSession connects the SDK's own client to the daemon's /mcp on the
// Unix socket.
func mcpSession(t *testing.T, td *testDaemon) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://continuityd/mcp", HTTPClient: td.http, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPOverHTTP(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	cs := mcpSession(t, td)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Fatalf("tool %s lacks a description or schema", tl.Name)
		}
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "capsule_read,capsule_seal,capsule_write,checkpoint,file_history,history_restore,resume,signal,snapshot_diff,snapshot_list,snapshot_take,wait_for_event" {
		t.Fatalf("tools: %v", names)
	}

	res := callTool(t, cs, "checkpoint", map[string]any{"focus": "ship the MCP server", "working_state": map[string]any{"next_action": "test it over HTTP"}})
	if res.IsError {
		t.Fatalf("checkpoint: %s", text(res))
	}
	res = callTool(t, cs, "resume", map[string]any{"peek": true})
	if res.IsError || !strings.Contains(text(res), "ship the MCP server") || !strings.Contains(text(res), "test it over HTTP") {
		t.Fatalf("resume: %s", text(res))
	}
	// A refusal is a tool error with the API's code.
	res = callTool(t, cs, "checkpoint", map[string]any{"decide": map[string]any{"chosen": "x", "because": "short"}})
	if !res.IsError || !strings.HasPrefix(text(res), "MOTIVE_REQUIRED (decide.because)") {
		t.Fatalf("refusal: %v %s", res.IsError, text(res))
	}
	res = callTool(t, cs, "capsule_write", map[string]any{"capsule": map[string]any{"version": "1", "goal": "handoff"}})
	if res.IsError {
		t.Fatalf("capsule_write: %s", text(res))
	}
	if res := callTool(t, cs, "capsule_read", nil); res.IsError || !strings.Contains(text(res), "handoff") {
		t.Fatalf("capsule_read: %s", text(res))
	}
	if res := callTool(t, cs, "capsule_seal", map[string]any{"handoff_to": "next"}); res.IsError || !strings.Contains(text(res), `"sealed":true`) {
		t.Fatalf("capsule_seal: %s", text(res))
	}

	// wait_for_event is woken by a signal sent through another tool call.
	cursor := td.expectOK("GET", "/v1/continuity/wait?max_seconds=1", nil)["cursor"]
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_event", Arguments: map[string]any{"max_seconds": 20, "after": cursor}})
		done <- r
	}()
	// No pause needed: with the cursor, the wait sees the signal whether
	// it parks first or not.
	if res := callTool(t, cs, "signal", map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"}); res.IsError {
		t.Fatalf("signal: %s", text(res))
	}
	select {
	case r := <-done:
		var ans struct {
			Woke   string `json:"woke"`
			Events []struct {
				Kind string         `json:"kind"`
				Data map[string]any `json:"data"`
			} `json:"events"`
		}
		if r == nil || json.Unmarshal([]byte(text(r)), &ans) != nil || ans.Woke != "event" || ans.Events[len(ans.Events)-1].Data["via"] != "mcp" {
			t.Fatalf("wait_for_event: %+v", ans)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wait_for_event was not woken")
	}
}

func TestMCPRefusesCrossOrigin(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	req, _ := http.NewRequest("POST", "http://continuityd/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := td.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin /mcp: %d", resp.StatusCode)
	}
	// The handoff of continuityd mcp's stdio too, before any upgrade.
	req, _ = http.NewRequest("GET", "http://continuityd/mcp/stdio", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ops.MCPStdioUpgrade)
	resp, err = td.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin /mcp/stdio: %d", resp.StatusCode)
	}
}
