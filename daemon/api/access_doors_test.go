package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/api"
)

// TestEveryDoorRefusesAStranger: a peer on the socket whose user the agent
// does not admit (the agent has no workdir and names nobody) gets 403
// AGENT_FORBIDDEN naming it from the HTTP routes and from /mcp's tools,
// sees no agent in /v1/status, and still gets /healthz.
func TestEveryDoorRefusesAStranger(t *testing.T) {
	ta := newTestAPI(t)
	stranger := uint32(os.Getuid()) + 4242
	if os.Getuid() == 0 {
		stranger = 4242
	}
	srv := httptest.NewUnstartedServer(ta.h)
	srv.Config.ConnContext = api.PeerAs(stranger)
	srv.Start()
	t.Cleanup(srv.Close)

	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/continuity", ""},
		{http.MethodPost, "/v1/continuity/checkpoint", `{"focus":"not yours"}`},
		{http.MethodGet, "/v1/snapshots", ""},
		{http.MethodPost, "/v1/snapshots/latest/restore", `{"dry_run":true}`},
		{http.MethodGet, "/v1/deadletter", ""},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), capsule.CodeAgentForbidden) || !strings.Contains(string(b), `\"builder\"`) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	if seq := ta.ag.Store().Resume().Seq; seq != 0 {
		t.Errorf("a refused checkpoint was stored: seq %d", seq)
	}

	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/v1/status"); code != 200 || strings.Contains(body, "builder") {
		t.Errorf("/v1/status shows the stranger the agent: %d %s", code, body)
	}

	stranded := *ta
	stranded.srv = srv
	cs := stranded.mcpSession(t, "")
	for _, name := range []string{"resume", "checkpoint"} {
		args := ""
		if name == "checkpoint" {
			args = `{"focus":"not yours"}`
		}
		refused, v := tool(t, cs, name, args)
		if code, _ := errorOf(v); !refused || code != capsule.CodeAgentForbidden {
			t.Errorf("MCP %s: refused %v, %v", name, refused, v)
		}
	}
}

// TestMCPSessionBelongsToItsOpener: a session opened by a user the agent
// admits is another user's unknown session: its id, reused by a stranger
// for a tool call, a stream or a DELETE, gets exactly the answer a made-up
// id gets, nothing is written, and the opener's session goes on.
func TestMCPSessionBelongsToItsOpener(t *testing.T) {
	ta := newTestAPI(t)
	opener := uint32(os.Getuid()) // the daemon's own user: the agent admits it
	stranger := opener + 4242
	serve := func(uid uint32) *httptest.Server {
		srv := httptest.NewUnstartedServer(ta.h)
		srv.Config.ConnContext = api.PeerAs(uid)
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	mine, theirs := serve(opener), serve(stranger)
	owned := *ta
	owned.srv = mine
	cs := owned.mcpSession(t, "?agent=builder")
	id := cs.ID()
	if id == "" {
		t.Fatal("the session has no id")
	}

	ask := func(method, sessionID, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, theirs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Mcp-Session-Id", sessionID)
		// Bounded: the opener's stream, served to the stranger (the bug),
		// would never end.
		c := theirs.Client()
		c.Timeout = 10 * time.Second
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"checkpoint","arguments":{"focus":"written through a stolen session"}}}`
	for _, c := range []struct{ method, body string }{
		{http.MethodPost, call},
		{http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"resume","arguments":{}}}`},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		status, body := ask(c.method, id, c.body)
		wantStatus, want := ask(c.method, "0123456789ABCDEFGHIJKLMNOP", c.body)
		if status != wantStatus || body != want || status != http.StatusNotFound || !strings.Contains(body, capsule.CodeNotFound) {
			t.Errorf("%s with the opener's session id as a stranger: %d %s\nwant what an unknown id gets: %d %s", c.method, status, body, wantStatus, want)
		}
	}
	if seq := ta.ag.Store().Resume().Seq; seq != 0 {
		t.Errorf("the stranger's checkpoint was stored: seq %d", seq)
	}
	// The opener's session was neither closed nor taken.
	if refused, v := tool(t, cs, "checkpoint", `{"focus":"the opener's own"}`); refused {
		t.Fatalf("the opener's checkpoint after the stranger's tries: %v", v)
	}
}

// TestMCPSessionsBoundedPerUser: a user other than root and the daemon's
// own holds at most a quarter of daemon.mcp_max_sessions; at that bound
// its own least recently used idle session gives way, never another
// user's.
func TestMCPSessionsBoundedPerUser(t *testing.T) {
	rt := newTestRuntime(t)
	h := api.New(api.Options{Runtime: rt, Version: "test", Stopping: t.Context(), MCPMaxSessions: 8}).Handler()
	serve := func(uid uint32) *testAPI {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ConnContext = api.PeerAs(uid)
		srv.Start()
		t.Cleanup(srv.Close)
		return &testAPI{h: h, srv: srv, ag: rt.ag}
	}
	self := uint32(os.Getuid())
	owner, stranger := serve(self), serve(self+4242)
	kept := owner.mcpSession(t, "")
	var strangers []*mcp.ClientSession
	for range 3 { // its bound is 8/4 = 2
		strangers = append(strangers, stranger.mcpSession(t, ""))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := strangers[0].ListTools(ctx, nil); err == nil {
		t.Error("the stranger's first session outlived its third: want it closed at the bound of 2")
	}
	for i, cs := range append(strangers[1:], kept) {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("session %d closed: %v", i, err)
		}
	}
}
