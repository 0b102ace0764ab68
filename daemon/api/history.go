package api

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// handleHistory is GET /v1/history?path=P: a file's versions from the
// version journal.
func (a *API) handleHistory(w http.ResponseWriter, r *http.Request, ag *agent.Agent, _ *guard.Guard) {
	ans, err := ag.History(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// handleHistoryRestore is POST /v1/history/restore: one version of one
// file back, after a safety snapshot.
func (a *API) handleHistoryRestore(w http.ResponseWriter, r *http.Request, ag *agent.Agent, _ *guard.Guard) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	res, err := ag.RestoreVersion(r.Context(), body)
	if err != nil {
		writeError(w, err)
		return
	}
	if !res.DryRun {
		a.log.Info("a file's version restored", "agent", ag.Name(), "version", termsafe.Line(res.Version.ID), "safety", res.Safety, "files", len(res.Changes))
	}
	writeJSON(w, http.StatusOK, res)
}
