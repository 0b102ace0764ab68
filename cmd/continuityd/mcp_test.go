package main

import (
	"slices"

	"context"
	"encoding/json"
	"github.com/continuityd/continuityd/internal/ops"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPOverStdio drives `continuityd mcp` with the SDK's own client, as
// Claude Code or Codex would start it.
func TestMCPOverStdio(t *testing.T) {
	w := newWorkspace(t)
	startProc(t, w.socket, nil, "run", "--config", w.config)
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "CONTINUITYD_SOCKET="+w.socket)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	// Every tool the operations table declares, and no other.
	var served, declared []string
	for _, tl := range tools.Tools {
		served = append(served, tl.Name)
	}
	for _, o := range ops.Table() {
		if o.MCP != nil {
			declared = append(declared, o.MCP.Name)
		}
	}
	slices.Sort(served)
	slices.Sort(declared)
	if !slices.Equal(served, declared) {
		t.Fatalf("tools served over stdio %v, the table declares %v", served, declared)
	}
	call := func(name string, args any) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res.IsError
	}
	if out, isErr := call("checkpoint", map[string]any{"focus": "talk MCP over stdio"}); isErr {
		t.Fatalf("checkpoint: %s", out)
	}
	if out, isErr := call("resume", nil); isErr || !strings.Contains(out, "talk MCP over stdio") {
		t.Fatalf("resume: %s", out)
	}
	// The cursor of now: the waiter sees the signal whether it parks
	// before the signal lands or asks after it.
	now, _ := call("wait_for_event", map[string]any{"max_seconds": 1})
	var at struct {
		Cursor *uint64 `json:"cursor"`
	}
	if err := json.Unmarshal([]byte(now), &at); err != nil || at.Cursor == nil {
		t.Fatalf("wait_for_event gave no cursor: %v %s", err, now)
	}
	done := make(chan string, 1)
	go func() {
		out, _ := call("wait_for_event", map[string]any{"max_seconds": 20, "after": *at.Cursor})
		done <- out
	}()
	if out, isErr := call("signal", map[string]any{"kind": "context", "used_fraction": 0.7}); isErr {
		t.Fatalf("signal: %s", out)
	}
	select {
	case out := <-done:
		if !strings.Contains(out, `"woke":"event"`) || !strings.Contains(out, `"via":"mcp"`) {
			t.Fatalf("wait_for_event: %s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wait_for_event not woken")
	}
	if out, isErr := call("capsule_write", map[string]any{"capsule": map[string]any{"version": "9"}}); !isErr || !strings.HasPrefix(out, "INVALID_CAPSULE") {
		t.Fatalf("bad capsule: %v %s", isErr, out)
	}
}
