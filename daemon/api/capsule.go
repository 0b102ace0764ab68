package api

import (
	"context"
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
)

// handleCapsuleGet is GET /v1/capsule.
func (a *API) handleCapsuleGet(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	rec, err := ag.Capsule()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// bodyDoor is the door of an operation that takes the request body (and
// the guard it must pass): read the body within its limits, call the
// operation, answer with what it returns or its refusal. PUT /v1/capsule,
// POST /v1/capsule/seal and POST /v1/signals are such doors.
func bodyDoor[T any](op func(ag *agent.Agent, ctx context.Context, g *guard.Guard, body []byte) (T, error)) agentHandler {
	return func(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
		body, berr := readBody(w, r)
		if berr != nil {
			writeError(w, berr)
			return
		}
		ans, err := op(ag, r.Context(), g, body)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ans)
	}
}
