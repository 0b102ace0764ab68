package api

import (
	"context"
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
)

// handleFleetTake makes this daemon the agent's writer in its fleet
// (`continuityd fleet take AGENT [--force]`), bounded as GET /v1/fleet is.
func (a *API) handleFleetTake(w http.ResponseWriter, r *http.Request, ag *agent.Agent, _ *guard.Guard) {
	force, qerr := boolQuery(r, "force")
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	ans, err := ag.FleetTake(ctx, r.URL.Query().Get("upstream"), force)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
