package ui

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/ops"
)

// call calls the operation e as the request's session's user, in process
// through the API's own routes (api.InProcess), and decodes its answer:
// the very checks and answers of the same user's call over the socket. A
// refusal is the API's (*client.APIError), its message naming only what
// that user may see.
func call[Req, Ans any](ctx context.Context, s *Server, e ops.Endpoint[Req, Ans], a ops.Args) (*Ans, error) {
	id := sessionOf(ctx).id
	c := api.InProcess(s.o.API, api.AsUser(ctx, id.UID, id.GID))
	ans, _, err := e.Call(ctx, c, a)
	return ans, err
}

// bodyOf is v as an operation's JSON body.
func bodyOf(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// agentQuery is the query naming an agent.
func agentQuery(name string, kv ...string) url.Values {
	q := url.Values{"agent": {name}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q
}
