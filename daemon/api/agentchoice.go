package api

import (
	"slices"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
)

// AgentChoice is the runtime's answer when a request picks no agent it
// may be served: several agents and none named (AGENT_REQUIRED), a name
// the daemon does not serve (UNKNOWN_AGENT), or an agent that is not
// served now (AGENT_DAMAGED, AGENT_MOVED). These name agents, and a
// caller on a shared socket is told only of the agents it may use
// (agentRefusal): which other agents a daemon serves, and where they
// work, is not every caller's to know.
type AgentChoice struct {
	// Refusal is the answer for a caller who may use every agent (the
	// loopback listener's token holder, the daemon's own callers).
	Refusal *capsule.Error
	// Agent is the agent a damaged or moved refusal is about; "" for the
	// others.
	Agent string
	// Asked is the name asked for (UNKNOWN_AGENT), Served the agents the
	// daemon serves, in configuration order.
	Asked  string
	Served []string
	// Reason, when set, says why no agent was picked before the way out
	// (a directory that lies in no place, and why it is not adopted).
	Reason string
}

func (e *AgentChoice) Error() string { return e.Refusal.Error() }

// Unwrap makes errors.As(err, &*capsule.Error) find the refusal.
func (e *AgentChoice) Unwrap() error { return e.Refusal }

// agentRefusal is what caller p (on the runtime rt) (nil: one who may use every agent) is
// told for err, the runtime's refusal to pick an agent: an AgentChoice
// names only the agents p may use; a damaged or moved agent p may not use
// is refused to it like any agent it may not use.
func agentRefusal(rt Runtime, p *peer, err error) error {
	ch, ok := err.(*AgentChoice)
	if !ok || p == nil {
		return err
	}
	if ch.Agent != "" {
		ac, ok := rt.AgentConfig(ch.Agent)
		if !ok {
			return capsule.Refuse(capsule.CodeAgentForbidden, "agent", "agent %q is not served to this caller", ch.Agent)
		}
		if ferr := p.mayUse(ac); ferr != nil {
			return ferr
		}
		return ch.Refusal
	}
	mine := slices.DeleteFunc(slices.Clone(ch.Served), func(name string) bool {
		ac, ok := rt.AgentConfig(name)
		return !ok || p.mayUse(ac) != nil
	})
	yours := "the agents you may use here: " + quoteList(mine)
	if len(mine) == 0 {
		yours = "no agent here is served to you"
		if p.err == nil {
			yours = "no agent here is served to uid " + strconv.FormatUint(uint64(p.cred.UID), 10)
		}
	}
	switch ch.Refusal.Code {
	case capsule.CodeAgentRequired:
		if ch.Reason != "" {
			return capsule.Refuse(capsule.CodeAgentRequired, "agent", "%s; name an agent with ?agent=; %s", ch.Reason, yours)
		}
		return capsule.Refuse(capsule.CodeAgentRequired, "agent", "name an agent with ?agent=; %s", yours)
	case capsule.CodeUnknownAgent:
		return capsule.Refuse(capsule.CodeUnknownAgent, "agent", "no agent %q that you may use; %s", ch.Asked, yours)
	}
	return ch.Refusal
}

// quoteList is names quoted, comma-separated.
func quoteList(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(n)
	}
	return out
}
