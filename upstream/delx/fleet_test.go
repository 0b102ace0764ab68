package delx_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
	"github.com/continuityd/continuityd/upstream/delx"
	"github.com/continuityd/continuityd/upstream/delxtest"
)

const invite = "inv-alpha-3f9d27c1"

// fleetEnv is a fake with fleet alpha and three agents: a and b configured
// with its invite token, c with the fleet but no token (it never joined),
// and d in no fleet. url, when set, is where the client goes instead.
func fleetEnv(t *testing.T, o delxtest.Options, url string) (*delxtest.Server, *delx.Client) {
	t.Helper()
	t.Cleanup(func() { verifyNoLeaks(t) })
	o.AgentTokens = map[string]string{"a": "tok-a", "b": "tok-b", "c": "tok-c", "d": "tok-d"}
	o.Sessions = map[string]string{"s-a": "a", "s-b": "b", "s-c": "c", "s-d": "d"}
	o.Fleets = map[string]string{"alpha": invite}
	fake := delxtest.New(o)
	t.Cleanup(fake.Close)
	if url == "" {
		url = fake.URL()
	}
	c, err := delx.New(delx.Options{Name: "delx", URL: url, Identity: func(agent string) (delx.Identity, error) {
		id := delx.Identity{AgentID: agent, SessionID: "s-" + agent, Token: "tok-" + agent}
		switch agent {
		case "a", "b":
			id.FleetID, id.InviteToken = "alpha", invite
		case "c":
			id.FleetID = "alpha"
		}
		return id, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return fake, c
}

// TestFleetMemberReadsAMember: a's capsule goes to Delx with the fleet and
// its invite token; b, a member, reads it through the fleet; c, which never
// joined, is refused by Delx (NOT_FLEET_MEMBER, Rejected); d, in no fleet,
// sends nothing.
func TestFleetMemberReadsAMember(t *testing.T) {
	fake, c := fleetEnv(t, delxtest.Options{}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Deliver(ctx, "a", write(capsule.WriteCapsule, 1, testCapsule())); err != nil {
		t.Fatal(err)
	}
	calls := fake.Calls()
	if len(calls) != 1 || calls[0].FleetID != "alpha" || calls[0].InviteToken != invite || calls[0].Result != "ok" {
		t.Fatalf("calls = %+v", calls)
	}

	raw, err := c.ReadMember(ctx, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(testCapsule().Goal)) || !bytes.Contains(raw, []byte(`"found":true`)) {
		t.Fatalf("b reading a: %s", raw)
	}

	before := len(fake.Calls())
	_, err = c.ReadMember(ctx, "c", "a")
	ue := asUpstreamError(t, err)
	if ue.Outcome != upstream.Rejected || ue.Code != "NOT_FLEET_MEMBER" || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("c reading a: %s %q: %v", outcomeNames[ue.Outcome], ue.Code, err)
	}
	if calls := fake.Calls(); len(calls) != before+1 || calls[before].FleetID != "alpha" || calls[before].InviteToken != "" {
		t.Fatalf("c's call: %+v", calls[before:])
	}
	if _, err := c.ReadMember(ctx, "d", "a"); !errors.Is(err, upstream.ErrNoFleet) {
		t.Fatalf("d reading a: %v, want ErrNoFleet", err)
	}
	if n := len(fake.Calls()); n != before+1 {
		t.Fatalf("d's read went out (%d calls)", n)
	}
}

// TestInviteTokenStaysWithDelx: a Delx that echoes the invite token in a
// refusal has it replaced in the error (which reaches status and logs).
func TestInviteTokenStaysWithDelx(t *testing.T) {
	fake, c := fleetEnv(t, delxtest.Options{}, "")
	fake.Script(delxtest.Fault{Method: "tools/call", ToolError: "invite_token " + invite + " was refused"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.Deliver(ctx, "a", write(capsule.WriteCapsule, 1, testCapsule()))
	if err == nil || strings.Contains(err.Error(), invite) || !strings.Contains(err.Error(), "[invite token]") {
		t.Fatalf("an echoed invite token: %v", err)
	}

}

// TestInviteTokenNotRedirected: a redirect to another host carries neither
// the credential nor the body that holds the invite token.
func TestInviteTokenNotRedirected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var leaked atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(invite)) || r.Header.Get(delx.HeaderAgentToken) != "" {
			leaked.Store(true)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/v1/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	_, rc := fleetEnv(t, delxtest.Options{}, redirect.URL+"/v1/mcp")
	if err := rc.Deliver(ctx, "a", write(capsule.WriteCapsule, 1, testCapsule())); err == nil {
		t.Fatal("a delivery through a redirect to another host went through")
	}
	if _, err := rc.ReadMember(ctx, "b", "a"); err == nil {
		t.Fatal("a read through a redirect to another host went through")
	}
	if leaked.Load() {
		t.Fatal("the other host got the invite token or the credential")
	}
}
