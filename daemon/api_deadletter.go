package daemon

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/continuityd/continuityd/capsule"
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

// deadLetterRequest names one dead letter (seq) or all of an upstream's
// (seq 0 or left out).
type deadLetterRequest struct {
	Upstream string `json:"upstream"`
	Seq      uint64 `json:"seq"`
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
		var req deadLetterRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, capsule.Refuse(capsule.CodeInvalidJSON, "", "want {\"upstream\": NAME, \"seq\": N}: %v", err))
			return
		}
		sh := a.shipper(req.Upstream)
		if sh == nil {
			writeError(w, capsule.Refuse(capsule.CodeInvalidField, "upstream",
				"agent %s does not ship to an upstream called %q", a.name, req.Upstream))
			return
		}
		var n int
		var err error
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
