package delxtest_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

const fleetInvite = "inv-alpha-71c2"

// TestFleets: an agent joins a fleet with its invite token; a member reads
// another member's capsule written to the fleet; a caller that never
// joined, a wrong invite token, a member reading a non-member, and a read
// of another agent without a fleet are each refused with a code that names
// the problem and never repeats the token.
func TestFleets(t *testing.T) {
	o := delxtest.Options{
		AgentTokens: map[string]string{agent: token, "agent-b": "tok-b", "agent-c": "tok-c"},
		Sessions:    map[string]string{"s1": agent, "s-b": "agent-b", "s-c": "agent-c"},
		Fleets:      map[string]string{"alpha": fleetInvite},
	}
	s := newFake(t, o)
	a := connect(t, s, agent, token)
	b := connect(t, s, "agent-b", "tok-b")
	c := connect(t, s, "agent-c", "tok-c")

	// refused checks a tool error: its structured code, and that its text
	// never repeats the invite token.
	refused := func(what, code string, res *mcp.CallToolResult, text string) {
		t.Helper()
		var sc struct {
			Error struct{ Code string } `json:"error"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &sc)
		if !res.IsError || sc.Error.Code != code {
			t.Errorf("%s: isError %v, code %q (%s), want %s", what, res.IsError, sc.Error.Code, text, code)
		}
		if strings.Contains(text, fleetInvite) || strings.Contains(string(raw), fleetInvite) {
			t.Errorf("%s: the refusal repeats the invite token: %q", what, text)
		}
	}

	// A joins with the token and writes to the fleet; B joins by reading.
	res, text := callTool(t, a, "leave_hive_note", map[string]any{"session_id": "s1", "capsule": goodCapsule, "fleet_id": "alpha", "invite_token": fleetInvite})
	if res.IsError {
		t.Fatalf("a member's note refused: %s", text)
	}
	res, text = callTool(t, b, "resume_session", map[string]any{"agent_id": agent, "fleet_id": "alpha", "invite_token": fleetInvite})
	var got struct {
		Found     bool            `json:"found"`
		FleetID   string          `json:"fleet_id"`
		Capsule   json.RawMessage `json:"capsule"`
		SessionID string          `json:"session_id"`
	}
	if res.IsError || json.Unmarshal([]byte(text), &got) != nil || !got.Found || got.FleetID != "alpha" || !strings.Contains(string(got.Capsule), goodCapsule["goal"].(string)) {
		t.Fatalf("a member reading a member: %s", text)
	}
	if got.SessionID != "" {
		t.Errorf("another member's session_id is shown: %s", text)
	}
	// Once joined, the token is not needed again.
	if res, text = callTool(t, b, "resume_session", map[string]any{"agent_id": agent, "fleet_id": "alpha"}); res.IsError {
		t.Fatalf("a member reading without the token again: %s", text)
	}
	if m := s.Members("alpha"); !slices.Contains(m, agent) || !slices.Contains(m, "agent-b") || len(m) != 2 {
		t.Fatalf("members = %v", m)
	}

	for _, tc := range []struct {
		name, code string
		args       map[string]any
	}{
		{"a caller that never joined", "NOT_FLEET_MEMBER", map[string]any{"agent_id": agent, "fleet_id": "alpha"}},
		{"a wrong invite token", "INVALID_INVITE_TOKEN", map[string]any{"agent_id": agent, "fleet_id": "alpha", "invite_token": "inv-guess"}},
		{"an unknown fleet", "FLEET_NOT_FOUND", map[string]any{"agent_id": agent, "fleet_id": "beta", "invite_token": fleetInvite}},
		{"another agent without a fleet", "AGENT_MISMATCH", map[string]any{"agent_id": agent}},
		{"a token without its fleet", "INVALID_ARGUMENTS", map[string]any{"agent_id": agent, "invite_token": fleetInvite}},
	} {
		res, text := callTool(t, c, "resume_session", tc.args)
		refused(tc.name, tc.code, res, text)
		if strings.Contains(text, "Migrate") {
			t.Errorf("%s: the capsule was shown: %s", tc.name, text)
		}
	}
	// A member reading an agent that is not one; a non-member writing to
	// the fleet.
	res, text = callTool(t, b, "resume_session", map[string]any{"agent_id": "agent-c", "fleet_id": "alpha"})
	refused("a member reading a non-member", "NOT_FLEET_MEMBER", res, text)
	res, text = callTool(t, c, "leave_hive_note", map[string]any{"session_id": "s-c", "capsule": goodCapsule, "fleet_id": "alpha"})
	refused("a non-member writing to the fleet", "NOT_FLEET_MEMBER", res, text)
	if m := s.Members("alpha"); slices.Contains(m, "agent-c") {
		t.Fatalf("a refused caller joined: %v", m)
	}
	// A capsule written without the fleet stays private to its agent.
	if res, text = callTool(t, b, "leave_hive_note", map[string]any{"session_id": "s-b", "capsule": map[string]any{"version": "1", "goal": "private to b"}}); res.IsError {
		t.Fatal(text)
	}
	res, text = callTool(t, a, "resume_session", map[string]any{"agent_id": "agent-b", "fleet_id": "alpha"})
	if res.IsError || strings.Contains(text, "private to b") || !strings.Contains(text, `"found":false`) {
		t.Fatalf("a private capsule read through the fleet: %s", text)
	}
}

// TestFleetsSkipMembershipCheck: with the check off, the read refused in
// TestFleets goes through: the refusal is the fake's membership check, not
// something else.
func TestFleetsSkipMembershipCheck(t *testing.T) {
	s := newFake(t, delxtest.Options{
		AgentTokens:         map[string]string{agent: token, "agent-c": "tok-c"},
		Sessions:            map[string]string{"s1": agent, "s-c": "agent-c"},
		Fleets:              map[string]string{"alpha": fleetInvite},
		SkipMembershipCheck: true,
	})
	a := connect(t, s, agent, token)
	c := connect(t, s, "agent-c", "tok-c")
	if res, text := callTool(t, a, "leave_hive_note", map[string]any{"session_id": "s1", "capsule": goodCapsule, "fleet_id": "alpha", "invite_token": fleetInvite}); res.IsError {
		t.Fatal(text)
	}
	res, text := callTool(t, c, "resume_session", map[string]any{"agent_id": agent, "fleet_id": "alpha"})
	if res.IsError || !strings.Contains(text, `"found":true`) {
		t.Fatalf("without the check, a non-member's read: %s", text)
	}
}
