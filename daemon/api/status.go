package api

import (
	"net/http"
	"slices"

	"github.com/continuityd/continuityd/internal/ops"
)

// Status, ReloadStatus and AgentStatus are the answer to GET /v1/status,
// declared with the table of operations (package ops) so the daemon and
// the CLI share them.
type (
	Status       = ops.StatusAnswer
	ReloadStatus = ops.ReloadStatus
	AgentStatus  = ops.AgentStatus
	UIStatus     = ops.UIStatus
)

// handleStatus answers the daemon's state; a peer on the socket sees only
// the agents it may use.
func (a *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := a.o.Runtime.Status()
	if p := peerOf(r.Context()); p != nil {
		st.Agents = slices.DeleteFunc(st.Agents, func(as AgentStatus) bool {
			ac, ok := a.o.Runtime.AgentConfig(as.Name)
			return !ok || p.mayUse(ac) != nil
		})
		st.Places = slices.DeleteFunc(st.Places, func(ps ops.PlaceStatus) bool { return !mayUsePlace(p, ps.Name, ps.Workdir) })
		st.Moved = slices.DeleteFunc(st.Moved, func(m ops.PlaceMove) bool { return !mayUsePlace(p, m.To, m.Workdir) })
	}
	writeJSON(w, http.StatusOK, st)
}
