package api

import (
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

// handleCapsulePut is PUT /v1/capsule: the published schema, then the
// secret guard, then disk.
func (a *API) handleCapsulePut(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	ans, err := ag.PutCapsule(r.Context(), g, body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// handleCapsuleSeal is POST /v1/capsule/seal: build a capsule from the
// current state and receipts (optionally overridden by the body), check it
// like any capsule, and store it sealed.
func (a *API) handleCapsuleSeal(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	ans, err := ag.Seal(r.Context(), g, body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// handleSignal is POST /v1/signals.
func (a *API) handleSignal(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	ans, err := ag.Signal(r.Context(), g, body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
