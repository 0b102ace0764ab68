package daemon

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
)

var mcpMetricLine = regexp.MustCompile(`(?m)^continuityd_mcp_sessions(?:_evicted_total|\{state="(idle|in_call)"\}) (\S+)`)

// mcpSessionMetrics reads the MCP session metrics: live sessions idle and
// in a call, and the evictions so far.
func mcpSessionMetrics(td *testDaemon) (idle, inCall, evicted int) {
	td.t.Helper()
	_, raw := td.doRaw("GET", "/metrics", nil)
	for _, m := range mcpMetricLine.FindAllSubmatch(raw, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		switch string(m[1]) {
		case "idle":
			idle = int(v)
		case "in_call":
			inCall = int(v)
		default:
			evicted = int(v)
		}
	}
	return idle, inCall, evicted
}

// initializeMCP posts an MCP initialize with no session: a new session.
func initializeMCP(td *testDaemon) (int, []byte) {
	td.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://continuityd/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := td.http.Do(req)
	if err != nil {
		td.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestMCPSessionsInACallAreNotEvicted: at daemon.mcp_max_sessions a new
// session takes the place of an idle one, never of one with a tool call in
// progress; when every session has one, the new one is refused with 503
// MCP_SESSIONS_FULL, and it gets in once a call has ended.
func TestMCPSessionsInACallAreNotEvicted(t *testing.T) {
	cfg := testConfig(t)
	cfg.Daemon.MCPMaxSessions = 2
	td := startDaemon(t, cfg)
	cursor := td.expectOK("GET", "/v1/continuity/wait?max_seconds=1", nil)["cursor"]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	woke := make(chan error, 2)
	for range 2 {
		cs := mcpSession(t, td)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_event", Arguments: map[string]any{"max_seconds": 60, "after": cursor}})
			if err == nil && res.IsError {
				err = capsule.Refuse(capsule.CodeInternal, "", "%s", text(res))
			}
			woke <- err
		}()
	}
	waitFor(t, 30*time.Second, func() bool { _, inCall, _ := mcpSessionMetrics(td); return inCall == 2 })
	status, raw := initializeMCP(td)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(raw), capsule.CodeMCPSessionsFull) {
		t.Fatalf("a new session while both sessions are in a call: %d %s", status, raw)
	}
	// The event ends both calls: both sessions are idle again.
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"})
	for range 2 {
		if err := <-woke; err != nil {
			t.Fatalf("a wait_for_event call while the limit was reached: %v", err)
		}
	}
	waitFor(t, 30*time.Second, func() bool { idle, _, _ := mcpSessionMetrics(td); return idle == 2 })
	if status, raw := initializeMCP(td); status != http.StatusOK {
		t.Fatalf("a new session with two idle ones at the limit: %d %s", status, raw)
	}
	if idle, inCall, evicted := mcpSessionMetrics(td); idle != 2 || inCall != 0 || evicted != 1 {
		t.Fatalf("after one idle session gave way: %d idle, %d in a call, %d evicted", idle, inCall, evicted)
	}
}

// TestMCPSessionAtTheLimitEvictsTheLeastRecentlyUsed: with two sessions
// open at a limit of two, the one used longest ago (not the one opened
// first) gives way to a new one; the other keeps working.
func TestMCPSessionAtTheLimitEvictsTheLeastRecentlyUsed(t *testing.T) {
	cfg := testConfig(t)
	cfg.Daemon.MCPMaxSessions = 2
	td := startDaemon(t, cfg)
	first := mcpSession(t, td)
	second := mcpSession(t, td)
	// first is used after second was opened: second is the least recent.
	if res := callTool(t, first, "resume", map[string]any{"peek": true}); res.IsError {
		t.Fatalf("resume: %s", text(res))
	}
	third := mcpSession(t, td)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := second.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"peek": true}}); err == nil {
		t.Fatal("the least recently used session still answers after a third took its place")
	}
	for name, cs := range map[string]*mcp.ClientSession{"first": first, "third": third} {
		if res := callTool(t, cs, "resume", map[string]any{"peek": true}); res.IsError {
			t.Fatalf("the %s session after the eviction: %s", name, text(res))
		}
	}
	if idle, inCall, evicted := mcpSessionMetrics(td); idle != 2 || inCall != 0 || evicted != 1 {
		t.Fatalf("after the eviction: %d idle, %d in a call, %d evicted", idle, inCall, evicted)
	}
}
