package mcpserver

import (
	"context"
	"net/url"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/ops"
	"github.com/continuityd/continuityd/internal/client"
)

// ClientBackend is the Backend of `continuityd mcp` on stdio: each tool is
// one call of its operation (package ops) to the daemon's local API over
// its socket, so the daemon's own checks and codes apply.
func ClientBackend(c *client.Client) Backend { return clientBackend{c} }

type clientBackend struct{ c *client.Client }

// query is the agent's query, with more fields.
func query(name string, kv ...string) url.Values {
	q := url.Values{}
	if name != "" {
		q.Set("agent", name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// answer drops the raw answer Call also returns: the tool's result is made
// from the typed one.
func answer[T any](ans *T, _ []byte, err error) (*T, error) { return ans, err }

func (b clientBackend) Resume(ctx context.Context, name string, peek bool) (*capsule.Resume, error) {
	q := query(name)
	if peek {
		q.Set("peek", "true")
	}
	return answer(ops.Resume.Call(ctx, b.c, ops.Args{Query: q}))
}

func (b clientBackend) Checkpoint(ctx context.Context, name string, body []byte, sync bool) (*agent.CheckpointAnswer, error) {
	q := query(name)
	if sync {
		q.Set("sync", "true")
	}
	return answer(ops.Checkpoint.Call(ctx, b.c, ops.Args{Query: q, Body: body}))
}

func (b clientBackend) Wait(ctx context.Context, name string, seconds int, after *uint64) (*agent.WaitAnswer, error) {
	q := query(name)
	if seconds != 0 {
		q.Set("max_seconds", strconv.Itoa(seconds))
	}
	if after != nil {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	return answer(ops.Wait.Call(ctx, b.c, ops.Args{Query: q}))
}

func (b clientBackend) Capsule(ctx context.Context, name string) (*capsule.CapsuleRecord, error) {
	return answer(ops.CapsuleGet.Call(ctx, b.c, ops.Args{Query: query(name)}))
}

func (b clientBackend) PutCapsule(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error) {
	return answer(ops.CapsulePut.Call(ctx, b.c, ops.Args{Query: query(name), Body: body}))
}

func (b clientBackend) Seal(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error) {
	return answer(ops.Seal.Call(ctx, b.c, ops.Args{Query: query(name), Body: body}))
}

func (b clientBackend) Signal(ctx context.Context, name string, body []byte) (*agent.SignalAnswer, error) {
	return answer(ops.Signal.Call(ctx, b.c, ops.Args{Query: query(name), Body: body}))
}

func (b clientBackend) SnapshotList(ctx context.Context, name string) (*ops.SnapshotList, error) {
	return answer(ops.Snapshots.Call(ctx, b.c, ops.Args{Query: query(name)}))
}

func (b clientBackend) SnapshotDiff(ctx context.Context, name, id, against string) (*agent.DiffAnswer, error) {
	if id == "" {
		id = agent.Latest
	}
	q := query(name)
	if against != "" {
		q.Set("against", against)
	}
	return answer(ops.SnapshotDiff.Call(ctx, b.c, ops.Args{ID: id, Query: q}))
}
