package api

import (
	"context"
	"net/http"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// FleetAnswer is the answer to GET /v1/fleet, declared with the table of
// operations (package ops).
type FleetAnswer = ops.FleetAnswer

// FleetRuntime is a Runtime that has fleet upstreams to list.
type FleetRuntime interface {
	Fleet(ctx context.Context, upstream string) (*FleetAnswer, error)
}

// fleetTimeout bounds GET /v1/fleet: a fleet that does not answer is
// reported, not waited for (within the client commands' 10 s a call).
const fleetTimeout = 8 * time.Second

func (a *API) handleFleet(w http.ResponseWriter, r *http.Request) {
	fr, ok := a.o.Runtime.(FleetRuntime)
	if !ok {
		writeError(w, capsule.Refuse(capsule.CodeNotFound, "", "this daemon has no fleet"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	ans, err := fr.Fleet(ctx, r.URL.Query().Get("upstream"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
