package api

import (
	"context"
	"net/http"
	"time"

	"github.com/continuityd/continuityd/capsule"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
)

// memberReadTimeout bounds a read of a fellow fleet member's capsule: a
// Delx that does not answer is reported, within the client commands' 10 s
// a call.
const memberReadTimeout = 8 * time.Second

// handleCapsuleGet is GET /v1/capsule; with ?fleet_member=, a fellow Delx
// fleet member's capsule.
func (a *API) handleCapsuleGet(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	q := r.URL.Query()
	if q.Has("fleet_member") {
		ctx, cancel := context.WithTimeout(r.Context(), memberReadTimeout)
		defer cancel()
		rec, err := ag.FleetMemberCapsule(ctx, q.Get("fleet_member"), q.Get("upstream"), g)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
		return
	}
	if q.Has("upstream") {
		writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "upstream", "upstream goes with fleet_member: it names the delx upstream whose fleet to read through"))
		return
	}
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
