package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

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
