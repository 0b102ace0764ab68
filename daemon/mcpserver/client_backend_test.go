package mcpserver_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
)

// request is one request as the daemon stand-in saw it.
type request struct {
	method, path, query, body string
}

// daemonStandIn serves on a real Unix socket what the daemon's API would
// answer, and records each request.
func daemonStandIn(t *testing.T) (string, func() []request) {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("agent") == "refused":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why"}}`)
		case r.URL.Path == "/v1/continuity":
			io.WriteString(w, `{"agent":"builder","seq":2,"focus":"the goal"}`)
		default:
			io.WriteString(w, `{"seq":1}`)
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock, func() []request {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// Each tool over the socket's client is one call to the daemon's API: the
// right method, path, query and body.
func TestClientBackendRequests(t *testing.T) {
	sock, seen := daemonStandIn(t)
	c := client.New(sock)
	t.Cleanup(c.Close)
	cs := connect(t, mcpserver.Options{Backend: mcpserver.ClientBackend(c), Agent: "builder"})
	for _, tc := range []struct {
		tool, args string
		want       request
	}{
		{"resume", "", request{"GET", "/v1/continuity", "agent=builder", ""}},
		{"resume", `{"peek":true,"agent":"other"}`, request{"GET", "/v1/continuity", "agent=other&peek=true", ""}},
		{"checkpoint", "", request{"POST", "/v1/continuity/checkpoint", "agent=builder", `{}`}},
		{"checkpoint", `{"focus":"f","sync":"1"}`, request{"POST", "/v1/continuity/checkpoint", "agent=builder&sync=true", `{"focus":"f"}`}},
		{"wait_for_event", "", request{"GET", "/v1/continuity/wait", "agent=builder", ""}},
		{"wait_for_event", `{"max_seconds":5,"after":0}`, request{"GET", "/v1/continuity/wait", "after=0&agent=builder&max_seconds=5", ""}},
		{"capsule_read", "", request{"GET", "/v1/capsule", "agent=builder", ""}},
		{"capsule_write", `{"capsule":{"version":"1","goal":"g"}}`, request{"PUT", "/v1/capsule", "agent=builder", `{"version":"1","goal":"g"}`}},
		{"capsule_seal", "", request{"POST", "/v1/capsule/seal", "agent=builder", `{}`}},
		{"capsule_seal", `{"handoff_to":"next"}`, request{"POST", "/v1/capsule/seal", "agent=builder", `{"handoff_to":"next"}`}},
		{"signal", `{"kind":"context","used_fraction":0.5}`, request{"POST", "/v1/signals", "agent=builder", `{"kind":"context","used_fraction":0.5,"via":"mcp"}`}},
	} {
		res := callTool(t, cs, tc.tool, tc.args)
		if res.IsError {
			t.Errorf("%s %s: %s", tc.tool, tc.args, text(t, res))
		}
		got := seen()
		if len(got) != 1 || got[0].method != tc.want.method || got[0].path != tc.want.path || got[0].query != tc.want.query || !sameJSON(got[0].body, tc.want.body) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", tc.tool, tc.args, got, tc.want)
		}
	}

	// The resume document comes back as markdown and structured content.
	res := callTool(t, cs, "resume", "")
	if got := text(t, res); !strings.Contains(got, "# Where builder was") || !strings.Contains(got, "## Goal\nthe goal") {
		t.Errorf("resume text %q", got)
	}
	if doc, ok := res.StructuredContent.(map[string]any); !ok || doc["seq"] != float64(2) {
		t.Errorf("resume structured %v", res.StructuredContent)
	}
	// The daemon's refusal is the tool's, code, field and message.
	res = callTool(t, cs, "checkpoint", `{"agent":"refused","focus":"f"}`)
	if got := text(t, res); !res.IsError || got != "MOTIVE_REQUIRED (decide.because): say why" {
		t.Errorf("refusal: %v %q", res.IsError, got)
	}
	seen()

	// No agent anywhere: none is sent, the daemon picks its only one.
	cs = connect(t, mcpserver.Options{Backend: mcpserver.ClientBackend(c)})
	callTool(t, cs, "capsule_read", "")
	if got := seen(); len(got) != 1 || got[0].query != "" {
		t.Errorf("no agent: %+v, want no query", got)
	}
}

// A daemon that is not there is DAEMON_UNREACHABLE, naming the socket.
func TestClientBackendUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	c := client.New(sock)
	t.Cleanup(c.Close)
	cs := connect(t, mcpserver.Options{Backend: mcpserver.ClientBackend(c)})
	for _, tool := range []string{"resume", "checkpoint", "capsule_read"} {
		res := callTool(t, cs, tool, "")
		if got := text(t, res); !res.IsError || !strings.HasPrefix(got, "DAEMON_UNREACHABLE: ") || !strings.Contains(got, sock) {
			t.Errorf("%s: %v %q", tool, res.IsError, got)
		}
	}
}
