package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/testkit/mcptest"
	"github.com/continuityd/continuityd/internal/testkit/socktest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// daemonStandIn serves on a real Unix socket what the daemon's API would
// answer, and records each request. It is a daemon without GET /mcp/stdio
// (404, as before it was added): `continuityd mcp` serves its client
// itself, over the API.
func daemonStandIn(t *testing.T) (string, func() []socktest.Request) {
	return socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/mcp/stdio":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"NOT_FOUND","message":"no such path"}}`)
		case r.URL.Query().Get("agent") == "refused":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why"}}`)
		case r.URL.Path == "/v1/continuity":
			io.WriteString(w, `{"agent":"builder","seq":2,"focus":"the goal"}`)
		default:
			io.WriteString(w, `{"seq":1}`)
		}
	})
}

// Each tool of `continuityd mcp` (stdio) is one call to the daemon's API: the
// right method, path, query and body.
func TestMCPClientBackendRequests(t *testing.T) {
	sock, seen := daemonStandIn(t)
	cs := mcpConnect(t, sock, "--agent", "builder")
	// The handoff was asked for first, refused, and the tools are served
	// by the fallback: each is one call.
	if got := seen(); len(got) != 1 || got[0].Path != "/mcp/stdio" || got[0].Query != "agent=builder" {
		t.Errorf("before the first tool: %+v, want the one refused GET /mcp/stdio?agent=builder", got)
	}
	for _, tc := range []struct {
		tool, args string
		want       socktest.Request
	}{
		{"resume", "", socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=builder", Body: ""}},
		{"resume", `{"peek":true,"agent":"other"}`, socktest.Request{Method: "GET", Path: "/v1/continuity", Query: "agent=other&peek=true", Body: ""}},
		{"checkpoint", "", socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder", Body: `{}`}},
		{"checkpoint", `{"focus":"f","sync":"1"}`, socktest.Request{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder&sync=true", Body: `{"focus":"f"}`}},
		{"wait_for_event", "", socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "agent=builder", Body: ""}},
		{"wait_for_event", `{"max_seconds":5,"after":0}`, socktest.Request{Method: "GET", Path: "/v1/continuity/wait", Query: "after=0&agent=builder&max_seconds=5", Body: ""}},
		{"capsule_read", "", socktest.Request{Method: "GET", Path: "/v1/capsule", Query: "agent=builder", Body: ""}},
		{"capsule_write", `{"capsule":{"version":"1","goal":"g"}}`, socktest.Request{Method: "PUT", Path: "/v1/capsule", Query: "agent=builder", Body: `{"version":"1","goal":"g"}`}},
		{"capsule_seal", "", socktest.Request{Method: "POST", Path: "/v1/capsule/seal", Query: "agent=builder", Body: `{}`}},
		{"capsule_seal", `{"handoff_to":"next"}`, socktest.Request{Method: "POST", Path: "/v1/capsule/seal", Query: "agent=builder", Body: `{"handoff_to":"next"}`}},
		{"signal", `{"kind":"context","used_fraction":0.5}`, socktest.Request{Method: "POST", Path: "/v1/signals", Query: "agent=builder", Body: `{"kind":"context","used_fraction":0.5,"via":"mcp"}`}},
	} {
		res := mcptest.CallTool(t, cs, tc.tool, tc.args)
		if res.IsError {
			t.Errorf("%s %s: %s", tc.tool, tc.args, mcptest.Text(t, res))
		}
		got := seen()
		if len(got) != 1 || got[0].Method != tc.want.Method || got[0].Path != tc.want.Path || got[0].Query != tc.want.Query || !mcptest.SameJSON(got[0].Body, tc.want.Body) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", tc.tool, tc.args, got, tc.want)
		}
	}

	// The resume document comes back as markdown and structured content.
	res := mcptest.CallTool(t, cs, "resume", "")
	if got := mcptest.Text(t, res); !strings.Contains(got, "# Where builder was") || !strings.Contains(got, "## Goal\nthe goal") {
		t.Errorf("resume text %q", got)
	}
	if doc, ok := res.StructuredContent.(map[string]any); !ok || doc["seq"] != float64(2) {
		t.Errorf("resume structured %v", res.StructuredContent)
	}
	// The daemon's refusal is the tool's, code, field and message.
	res = mcptest.CallTool(t, cs, "checkpoint", `{"agent":"refused","focus":"f"}`)
	if got := mcptest.Text(t, res); !res.IsError || got != "MOTIVE_REQUIRED (decide.because): say why" {
		t.Errorf("refusal: %v %q", res.IsError, got)
	}
	seen()

	// No agent anywhere: the directory the client runs in is sent, and
	// the daemon acts on the place holding it (its only agent when none
	// does: the client asks again without it).
	cs = mcpConnect(t, sock)
	seen()
	mcptest.CallTool(t, cs, "capsule_read", "")
	wd, _ := os.Getwd()
	if got, want := seen(), (url.Values{"cwd": {wd}}).Encode(); len(got) != 1 || got[0].Query != want {
		t.Errorf("no agent: %+v, want cwd=%s", got, wd)
	}
}

// A daemon that is not there is DAEMON_UNREACHABLE, naming the socket.
func TestMCPClientBackendUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	cs := mcpConnect(t, sock)
	for _, tool := range []string{"resume", "checkpoint", "capsule_read"} {
		res := mcptest.CallTool(t, cs, tool, "")
		if got := mcptest.Text(t, res); !res.IsError || !strings.HasPrefix(got, "DAEMON_UNREACHABLE: ") || !strings.Contains(got, sock) {
			t.Errorf("%s: %v %q", tool, res.IsError, got)
		}
	}
}

// mcpConnect runs `continuityd mcp --socket sock ARGS` as an MCP client's
// subprocess on stdio, the way an agent framework starts it.
func mcpConnect(t *testing.T, sock string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"mcp", "--socket", sock}, args...)...)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
