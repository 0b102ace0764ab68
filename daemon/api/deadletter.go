package api

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/ops"
)

// handleDeadLetters is GET /v1/deadletter[?upstream=NAME]: the writes
// upstreams refused for good.
func (a *API) handleDeadLetters(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	dl, err := ag.DeadLetters(r.URL.Query().Get("upstream"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ops.DeadLetterList{Entries: dl})
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
		if retry {
			a.log.Info("dead letter retried", "agent", ag.Name(), "upstream", req.Upstream, "seq", req.Seq, "count", n)
			writeJSON(w, http.StatusOK, ops.DeadLettersRetried{Retried: n})
			return
		}
		a.log.Info("dead letter discarded", "agent", ag.Name(), "upstream", req.Upstream, "seq", req.Seq, "count", n)
		writeJSON(w, http.StatusOK, ops.DeadLettersDiscarded{Discarded: n})
	}
}
