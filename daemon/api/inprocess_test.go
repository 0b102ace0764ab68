package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// TestInProcessIsTheCaller: a door the daemon serves itself (a page, the
// MCP sessions) calls the operations through api.InProcess as the caller
// of its own request: a socket peer the agent does not admit is refused
// AGENT_FORBIDDEN as over the socket, and the loopback's token holder (no
// peer) is answered.
func TestInProcessIsTheCaller(t *testing.T) {
	ta := newTestAPI(t)
	stranger := uint32(os.Getuid()) + 4242
	if os.Getuid() == 0 {
		stranger = 4242
	}
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The call's own context carries no caller: the identity is the
		// one InProcess was given.
		_, _, err := ops.Resume.Call(t.Context(), api.InProcess(ta.h, r.Context()), ops.Args{Query: url.Values{"peek": {"1"}}})
		var ae *client.APIError
		switch {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case errors.As(err, &ae):
			http.Error(w, ae.Code, ae.Status)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	for _, tc := range []struct {
		name   string
		peer   bool
		status int
		body   string
	}{
		{"a stranger on the socket", true, http.StatusForbidden, capsule.CodeAgentForbidden + "\n"},
		{"the token holder", false, http.StatusOK, ""},
	} {
		srv := httptest.NewUnstartedServer(page)
		if tc.peer {
			srv.Config.ConnContext = api.PeerAs(stranger)
		}
		srv.Start()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var b [256]byte
		n, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != tc.status || string(b[:n]) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, b[:n], tc.status, tc.body)
		}
	}
}
