package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
)

// ClientBackend is the Backend of `continuityd mcp` on stdio: each tool is
// one call to the daemon's local API over its socket, so the daemon's own
// checks and codes apply.
func ClientBackend(c *client.Client) Backend { return clientBackend{c} }

type clientBackend struct{ c *client.Client }

// query is the agent's query, with more fields.
func query(agent string, kv ...string) url.Values {
	q := url.Values{}
	if agent != "" {
		q.Set("agent", agent)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

func (b clientBackend) do(ctx context.Context, method, path string, q url.Values, body []byte) (any, error) {
	out, err := b.c.Do(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(out), nil
}

func (b clientBackend) Resume(ctx context.Context, agent string, peek bool) (*capsule.Resume, error) {
	q := query(agent)
	if peek {
		q.Set("peek", "true")
	}
	out, err := b.c.Do(ctx, http.MethodGet, "/v1/continuity", q, nil)
	if err != nil {
		return nil, err
	}
	var r capsule.Resume
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (b clientBackend) Checkpoint(ctx context.Context, agent string, body []byte, sync bool) (any, error) {
	q := query(agent)
	if sync {
		q.Set("sync", "true")
	}
	return b.do(ctx, http.MethodPost, "/v1/continuity/checkpoint", q, body)
}

func (b clientBackend) Wait(ctx context.Context, agent string, seconds int, after *uint64) (any, error) {
	q := query(agent)
	if seconds != 0 {
		q.Set("max_seconds", strconv.Itoa(seconds))
	}
	if after != nil {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	return b.do(ctx, http.MethodGet, "/v1/continuity/wait", q, nil)
}

func (b clientBackend) Capsule(ctx context.Context, agent string) (any, error) {
	return b.do(ctx, http.MethodGet, "/v1/capsule", query(agent), nil)
}

func (b clientBackend) PutCapsule(ctx context.Context, agent string, body []byte) (any, error) {
	return b.do(ctx, http.MethodPut, "/v1/capsule", query(agent), body)
}

func (b clientBackend) Seal(ctx context.Context, agent string, body []byte) (any, error) {
	return b.do(ctx, http.MethodPost, "/v1/capsule/seal", query(agent), body)
}

func (b clientBackend) Signal(ctx context.Context, agent string, body []byte) (any, error) {
	return b.do(ctx, http.MethodPost, "/v1/signals", query(agent), body)
}
