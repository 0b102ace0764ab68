package daemoncmd

import (
	"context"
	"net/url"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// mcpClientBackend is the Backend of `continuityd mcp` on stdio: each tool is
// one call of its operation (package ops) to the daemon's local API over
// its socket, so the daemon's own checks and codes apply.
func newMCPClientBackend(c *client.Client) mcpserver.Backend { return mcpClientBackend{c} }

type mcpClientBackend struct{ c *client.Client }

// mcpQuery is the agent's query, with more fields.
func mcpQuery(name string, kv ...string) url.Values {
	q := url.Values{}
	if name != "" {
		q.Set("agent", name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// mcpAnswer drops the raw answer Call also returns: the tool's result is made
// from the typed one.
func mcpAnswer[T any](ans *T, _ []byte, err error) (*T, error) { return ans, err }

func (b mcpClientBackend) Resume(ctx context.Context, name string, peek bool) (*capsule.Resume, error) {
	q := mcpQuery(name)
	if peek {
		q.Set("peek", "true")
	}
	return mcpAnswer(ops.Resume.Call(ctx, b.c, ops.Args{Query: q}))
}

func (b mcpClientBackend) Checkpoint(ctx context.Context, name string, body []byte, sync bool) (*agent.CheckpointAnswer, error) {
	q := mcpQuery(name)
	if sync {
		q.Set("sync", "true")
	}
	return mcpAnswer(ops.Checkpoint.Call(ctx, b.c, ops.Args{Query: q, Body: body}))
}

func (b mcpClientBackend) Wait(ctx context.Context, name string, seconds int, after *uint64) (*agent.WaitAnswer, error) {
	q := mcpQuery(name)
	if seconds != 0 {
		q.Set("max_seconds", strconv.Itoa(seconds))
	}
	if after != nil {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	return mcpAnswer(ops.Wait.Call(ctx, b.c, ops.Args{Query: q}))
}

func (b mcpClientBackend) Capsule(ctx context.Context, name string) (*capsule.CapsuleRecord, error) {
	return mcpAnswer(ops.CapsuleGet.Call(ctx, b.c, ops.Args{Query: mcpQuery(name)}))
}

func (b mcpClientBackend) PutCapsule(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error) {
	return mcpAnswer(ops.CapsulePut.Call(ctx, b.c, ops.Args{Query: mcpQuery(name), Body: body}))
}

func (b mcpClientBackend) Seal(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error) {
	return mcpAnswer(ops.Seal.Call(ctx, b.c, ops.Args{Query: mcpQuery(name), Body: body}))
}

func (b mcpClientBackend) Signal(ctx context.Context, name string, body []byte) (*agent.SignalAnswer, error) {
	return mcpAnswer(ops.Signal.Call(ctx, b.c, ops.Args{Query: mcpQuery(name), Body: body}))
}

func (b mcpClientBackend) SnapshotList(ctx context.Context, name string) (*ops.SnapshotList, error) {
	return mcpAnswer(ops.Snapshots.Call(ctx, b.c, ops.Args{Query: mcpQuery(name)}))
}

func (b mcpClientBackend) SnapshotDiff(ctx context.Context, name, id, against string) (*agent.DiffAnswer, error) {
	if id == "" {
		id = agent.Latest
	}
	q := mcpQuery(name)
	if against != "" {
		q.Set("against", against)
	}
	return mcpAnswer(ops.SnapshotDiff.Call(ctx, b.c, ops.Args{ID: id, Query: q}))
}
