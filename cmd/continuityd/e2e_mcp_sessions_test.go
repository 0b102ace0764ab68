package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var mcpSessionsLine = regexp.MustCompile(`(?m)^continuityd_mcp_sessions\{state="(idle|in_call)"\} (\S+)`)

// mcpSessionStates reads continuityd_mcp_sessions from the daemon's
// /metrics: the live sessions idle and with a call in progress.
func mcpSessionStates(t *testing.T, c *http.Client) (idle, inCall int) {
	t.Helper()
	resp, err := c.Get("http://d/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, m := range mcpSessionsLine.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		if string(m[1]) == "idle" {
			idle = int(v)
		} else {
			inCall = int(v)
		}
	}
	return idle, inCall
}

// TestAbandonedMCPSessionsGiveWay: 5,000 MCP sessions opened and abandoned
// (a client in a restart loop, a script) against a daemon with the default
// limit (256) do not lock anybody out: at the limit each new session takes
// the place of the least recently used idle one. Afterwards a new client
// initializes and calls a tool; a session with a call in progress (a
// long wait_for_event, opened before the flood) was not evicted and its
// call ends normally; an evicted session's client gets 404 and the API's
// shape; the daemon's RSS and goroutines are what they were at the limit.
func TestAbandonedMCPSessionsGiveWay(t *testing.T) {
	t.Parallel()
	const abandoned, limit = 5000, 256
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A session busy in a long wait_for_event all through the flood.
	busy := mcpClientSession(t, p)
	cursor := get(t, c, "/v1/continuity/wait?max_seconds=1")["cursor"]
	woke := make(chan *mcp.CallToolResult, 1)
	wokeErr := make(chan error, 1)
	go func() {
		res, err := busy.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_event", Arguments: map[string]any{"max_seconds": 90, "after": cursor}})
		if err != nil {
			wokeErr <- err
			return
		}
		woke <- res
	}()
	deadline := time.Now().Add(30 * time.Second)
	for _, inCall := mcpSessionStates(t, c); inCall != 1; _, inCall = mcpSessionStates(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("the wait_for_event call is not in progress after 30 s (sessions in a call: %d)", inCall)
		}
		time.Sleep(20 * time.Millisecond)
	}

	open := func(i int) string {
		status, id, out, err := openMCPSession(c)
		if err != nil || status != http.StatusOK || id == "" {
			t.Fatalf("session %d: %v %d %s", i, err, status, out)
		}
		return id
	}
	// Fill the daemon to its limit, then measure: that much it may hold.
	first := open(0)
	for i := 1; i < limit; i++ {
		open(i)
	}
	if idle, inCall := mcpSessionStates(t, c); idle+inCall != limit {
		t.Fatalf("at the limit: %d idle and %d in a call, want %d in all", idle, inCall, limit)
	}
	rssAtLimit, goroutinesAtLimit := vmRSSMB(t, p.cmd.Process.Pid), daemonGoroutines(t, c)

	for i := limit; i < abandoned; i++ {
		open(i)
	}
	// The evicted sessions' goroutines end with them.
	var goroutines int
	deadline = time.Now().Add(60 * time.Second)
	for goroutines = daemonGoroutines(t, c); goroutines > goroutinesAtLimit+20; goroutines = daemonGoroutines(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d after %d abandoned sessions, %d at the limit of %d", goroutines, abandoned, goroutinesAtLimit, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rss := vmRSSMB(t, p.cmd.Process.Pid)
	t.Logf("RSS %.1f MB with %d sessions open, %.1f MB after %d; goroutines %d, then %d",
		rssAtLimit, limit, rss, abandoned, goroutinesAtLimit, goroutines)
	// Generous: the heap's goal and fragmentation move RSS some; a leak of
	// 4,744 sessions (each a server, its tools and goroutines) is far more.
	if rss > rssAtLimit*1.5+16 {
		t.Fatalf("RSS %.1f MB after %d abandoned sessions, %.1f MB at the limit: it grows with the sessions", rss, abandoned, rssAtLimit)
	}
	if idle, inCall := mcpSessionStates(t, c); idle+inCall != limit || inCall != 1 {
		t.Fatalf("after the flood: %d idle and %d in a call, want %d in all, 1 in a call", idle, inCall, limit)
	}

	// A new client gets in and calls a tool.
	fresh := mcpClientSession(t, p)
	res, err := fresh.CallTool(ctx, &mcp.CallToolParams{Name: "signal", Arguments: map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"}})
	if err != nil || res.IsError {
		t.Fatalf("a new client's tool call after %d abandoned sessions: %v %v", abandoned, err, res)
	}
	// The busy session was never evicted: its call ends as calls do (the
	// signal wakes it, unless its 90 s ran out first on a slow machine),
	// and the session takes the next one.
	select {
	case res := <-woke:
		var ans struct{ Woke string }
		if json.Unmarshal([]byte(toolText(res)), &ans); res.IsError || (ans.Woke != "event" && ans.Woke != "timeout") {
			t.Fatalf("the wait_for_event call in progress all through the flood: %s", toolText(res))
		}
	case err := <-wokeErr:
		t.Fatalf("the wait_for_event call in progress all through the flood failed: %v", err)
	case <-ctx.Done():
		t.Fatal("the wait_for_event call in progress did not end")
	}
	if res, err := busy.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"peek": true}}); err != nil || res.IsError {
		t.Fatalf("the session that was in a call all through the flood, called again: %v %v", err, res)
	}
	// The first abandoned session gave way: its client is told to start again.
	req, _ := http.NewRequest(http.MethodPost, "http://d/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", first)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code, _, msg := apiError(t, "an evicted session", body); resp.StatusCode != http.StatusNotFound || code != "NOT_FOUND" {
		t.Fatalf("an evicted session: %d %s %s", resp.StatusCode, code, msg)
	}
}
