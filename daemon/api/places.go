package api

import (
	"context"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
)

// PlaceRuntime is a Runtime that adopts places: a request whose directory
// lies in no agent's workdir may make that directory's project a place of
// its own, which only its owner may do, so the runtime is told who asks.
type PlaceRuntime interface {
	AgentFor(ctx context.Context, name, cwd string) (*agent.Agent, *guard.Guard, error)
}

// Caller is the uid of the process at the other end of the socket that
// carries ctx's request; ok is false for a request that did not come over
// the socket (the loopback listener's token holder, the daemon itself) or
// whose peer could not be read.
func Caller(ctx context.Context) (uid uint32, ok bool) {
	p := peerOf(ctx)
	if p == nil || p.err != nil {
		return 0, false
	}
	return p.cred.UID, true
}

// pickAgent is the runtime's agent for a request: through AgentFor when
// the runtime adopts places.
func (a *API) pickAgent(ctx context.Context, name, cwd string) (*agent.Agent, *guard.Guard, error) {
	if pr, ok := a.o.Runtime.(PlaceRuntime); ok {
		return pr.AgentFor(ctx, name, cwd)
	}
	return a.o.Runtime.Agent(name, cwd)
}

// mayUsePlace reports whether the caller of ctx's request may see the
// place in workdir in status: like an agent without users, its owner,
// root and the daemon's user.
func mayUsePlace(p *peer, name, workdir string) bool {
	return p.mayUse(config.Agent{Name: name, Workdir: workdir}) == nil
}
