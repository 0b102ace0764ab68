package daemon

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/residency"
)

// handleDeadLetters is GET /v1/deadletter[?upstream=NAME]: the writes
// upstreams refused for good.
func (d *Daemon) handleDeadLetters(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	up := r.URL.Query().Get("upstream")
	if up != "" && a.shipper(up) == nil {
		writeError(w, capsule.RefuseStatus(http.StatusNotFound, capsule.CodeNotFound, "upstream",
			"agent %s does not ship to an upstream called %q", a.name, up))
		return
	}
	dl, err := a.store.DeadLetters(up)
	if err != nil {
		writeError(w, err)
		return
	}
	if dl == nil {
		dl = []residency.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": dl})
}

// handleDeadLetterAction is POST /v1/deadletter/retry and
// /v1/deadletter/discard.
func (d *Daemon) handleDeadLetterAction(retry bool) agentHandler {
	return func(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
		body, berr := readBody(w, r)
		if berr != nil {
			writeError(w, berr)
			return
		}
		req, err := guard.DecodeDeadLetterRequest(body)
		if err != nil {
			writeError(w, err)
			return
		}
		sh := a.shipper(req.Upstream)
		if sh == nil {
			// The name is not repeated: a value pasted by mistake may be a secret.
			var names []string
			for _, s := range a.shippers {
				names = append(names, s.Name())
			}
			writeError(w, capsule.Refuse(capsule.CodeInvalidField, "upstream",
				"agent %s does not ship to an upstream of that name; it ships to %v", a.name, names))
			return
		}
		var n int
		if retry {
			n, err = a.store.RetryDead(r.Context(), req.Upstream, req.Seq)
			sh.Kick()
		} else {
			n, err = a.store.DiscardDead(r.Context(), req.Upstream, req.Seq)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		key := "discarded"
		if retry {
			key = "retried"
		}
		d.log.Info("dead letter "+key, "agent", a.name, "upstream", req.Upstream, "seq", req.Seq, "count", n)
		writeJSON(w, http.StatusOK, map[string]any{key: n})
	}
}
