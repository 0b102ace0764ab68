package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// choiceRuntime serves three agents, of which uid 5001 may use "ours"
// only; every pick is refused with choice.
type choiceRuntime struct{ choice *AgentChoice }

func (r choiceRuntime) Agent(string, string) (*agent.Agent, *guard.Guard, error) {
	return nil, nil, r.choice
}
func (choiceRuntime) Status() Status { return Status{} }
func (choiceRuntime) AgentConfig(name string) (config.Agent, bool) {
	switch name {
	case "ours":
		return config.Agent{Name: name, UIDs: []uint32{5001}}, true
	case "theirs", "secret":
		return config.Agent{Name: name, UIDs: []uint32{5002}}, true
	}
	return config.Agent{}, false
}

// TestAgentRefusalsNameOnlyTheCallersAgents: AGENT_REQUIRED and
// UNKNOWN_AGENT name to a socket peer only the agents it may use (none:
// none), a damaged or moved agent it may not use is AGENT_FORBIDDEN, and
// a caller who may use every agent (nil peer) gets the whole answer.
func TestAgentRefusalsNameOnlyTheCallersAgents(t *testing.T) {
	served := []string{"theirs", "ours", "secret"}
	required := &AgentChoice{Served: served, Refusal: capsule.Refuse(capsule.CodeAgentRequired, "agent", "serves %v", served)}
	unknown := &AgentChoice{Asked: "nobody", Served: served, Refusal: capsule.Refuse(capsule.CodeUnknownAgent, "agent", "no %q; serves %v", "nobody", served)}
	moved := &AgentChoice{Agent: "theirs", Refusal: capsule.Refuse(capsule.CodeAgentMoved, "agent", "agent theirs moved from /srv/old to /srv/new")}
	member := &peer{cred: safesocket.Cred{UID: 5001}}
	stranger := &peer{cred: safesocket.Cred{UID: 5009}}
	for _, c := range []struct {
		who    *peer
		choice *AgentChoice
		code   string
		names  []string // must appear
	}{
		{member, required, capsule.CodeAgentRequired, []string{`"ours"`}},
		{member, unknown, capsule.CodeUnknownAgent, []string{`"ours"`, `"nobody"`}},
		{stranger, required, capsule.CodeAgentRequired, []string{"uid 5009"}},
		{stranger, unknown, capsule.CodeUnknownAgent, []string{`"nobody"`}},
		{member, moved, capsule.CodeAgentForbidden, []string{`"theirs"`}},
	} {
		err := agentRefusal(choiceRuntime{c.choice}, c.who, c.choice)
		var ce *capsule.Error
		if !errors.As(err, &ce) || ce.Code != c.code {
			t.Errorf("uid %d, %s: %v, want %s", c.who.cred.UID, c.choice.Refusal.Code, err, c.code)
			continue
		}
		for _, n := range c.names {
			if !strings.Contains(ce.Message, n) {
				t.Errorf("uid %d, %s: %q does not say %s", c.who.cred.UID, c.code, ce.Message, n)
			}
		}
		for _, hidden := range []string{"secret", "/srv/"} {
			if strings.Contains(ce.Message, hidden) {
				t.Errorf("uid %d, %s: %q names %s, which it may not use", c.who.cred.UID, c.code, ce.Message, hidden)
			}
		}
		if ce.Code != capsule.CodeAgentForbidden && strings.Contains(ce.Message, "theirs") {
			t.Errorf("uid %d, %s: %q names theirs", c.who.cred.UID, c.code, ce.Message)
		}
	}
	if err := agentRefusal(choiceRuntime{required}, nil, required); err != required {
		t.Errorf("a caller who may use every agent: %v, want the whole answer", err)
	}
}
