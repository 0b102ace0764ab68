package api

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
)

// handleDeadLetters is GET /v1/deadletter[?upstream=NAME]: the writes
// upstreams refused for good.
func (a *API) handleDeadLetters(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	dl, err := ag.DeadLetters(r.URL.Query().Get("upstream"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": dl})
}

// handleDeadLetterAction is POST /v1/deadletter/retry and
// /v1/deadletter/discard.
func (a *API) handleDeadLetterAction(retry bool) agentHandler {
	return func(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
		body, berr := readBody(w, r)
		if berr != nil {
			writeError(w, berr)
			return
		}
		req, n, err := ag.DeadLetterAction(r.Context(), body, retry)
		if err != nil {
			writeError(w, err)
			return
		}
		key := "discarded"
		if retry {
			key = "retried"
		}
		a.log.Info("dead letter "+key, "agent", ag.Name(), "upstream", req.Upstream, "seq", req.Seq, "count", n)
		writeJSON(w, http.StatusOK, map[string]any{key: n})
	}
}
