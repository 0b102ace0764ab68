package api

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/ops"
)

// handleLog is GET /v1/log: the agent's work, one entry per snapshot,
// newest first, made from the snapshot list (what each snapshot records
// is all the log has: no context figure is kept with a snapshot).
func (a *API) handleLog(w http.ResponseWriter, r *http.Request, ag *agent.Agent, _ *guard.Guard) {
	l, err := ag.SnapshotList(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	ans := ops.LogAnswer{Agent: ag.Name(), Entries: make([]ops.LogEntry, 0, len(l))}
	for _, s := range l {
		e := ops.LogEntry{Time: s.Time, Trigger: s.Trigger, Snapshot: s.ID, Seq: s.Seq,
			Added: s.Added, Modified: s.Modified, Deleted: s.Deleted, Who: ag.Name()}
		if c := s.Conversation; c != nil {
			e.Session, e.Message = c.Session, c.Message
		}
		ans.Entries = append(ans.Entries, e)
	}
	writeJSON(w, http.StatusOK, ans)
}
