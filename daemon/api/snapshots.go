package api

import (
	"net/http"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// handleSnapshots is GET /v1/snapshots: the agent's work snapshots, newest
// first.
func (a *API) handleSnapshots(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	l, err := ag.SnapshotList(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ops.SnapshotList{Snapshots: l})
}

// handleSnapshot is GET /v1/snapshots/{id}: one snapshot with its files;
// ?diff=1 its unified diff against its parent (or &against=ID), at most
// &max_bytes (default and ceiling 1 MiB).
func (a *API) handleSnapshot(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	ExtendWriteDeadline(r, ops.SnapshotShow.Op().Waits(r.URL.Query())+writeMargin) // a fleet fetch first
	id := r.PathValue("id")
	diff, qerr := boolQuery(r, "diff")
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	q := r.URL.Query()
	if !diff {
		if q.Has("against") || q.Has("max_bytes") || q.Has("stat") || q.Has("path") {
			writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "diff", "against, max_bytes, stat and path go with diff=1"))
			return
		}
		d, err := ag.SnapshotShow(r.Context(), id)
		if err != nil {
			writeError(w, err)
			return
		}
		if d.Files == nil {
			d.Files = []snapshot.FileChange{}
		}
		if d.SkippedFiles == nil {
			d.SkippedFiles = []snapshot.Skipped{}
		}
		writeJSON(w, http.StatusOK, d)
		return
	}
	maxBytes := 0
	if v := q.Get("max_bytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > snapshot.DefaultDiffBytes {
			writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "max_bytes", "max_bytes must be an integer from 1 to %d", snapshot.DefaultDiffBytes))
			return
		}
		maxBytes = n
	}
	stat, qerr := boolQuery(r, "stat")
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	ans, err := ag.SnapshotDiffView(r.Context(), id, q.Get("against"), maxBytes, snapshot.View{Paths: q["path"], Stat: stat})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// handleSnapshotRestore is POST /v1/snapshots/{id}/restore:
// {"paths": [...], "dry_run": true}.
func (a *API) handleSnapshotRestore(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	ExtendWriteDeadline(r, ops.SnapshotRestore.Op().Waits(r.URL.Query())+writeMargin) // a fleet fetch first
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	res, err := ag.SnapshotRestore(r.Context(), r.PathValue("id"), body)
	if err != nil {
		writeError(w, err)
		return
	}
	if !res.DryRun {
		a.log.Info("work snapshot restored", "agent", ag.Name(), "snapshot", res.Snapshot, "safety", res.Safety, "files", len(res.Changes))
	}
	writeJSON(w, http.StatusOK, res)
}

// handleWorkLostRestore is POST /v1/continuity/work_lost/{id}/restore:
// {"dry_run": true}.
func (a *API) handleWorkLostRestore(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	ExtendWriteDeadline(r, ops.WorkLostRestore.Op().Waits(r.URL.Query())+writeMargin) // a fleet fetch first
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	res, err := ag.RestoreLost(r.Context(), r.PathValue("id"), body)
	if err != nil {
		writeError(w, err)
		return
	}
	if !res.DryRun {
		a.log.Info("lost work restored", "agent", ag.Name(), "lost", termsafe.Line(r.PathValue("id")), "snapshot", res.Snapshot, "safety", res.Safety, "files", len(res.Changes))
	}
	writeJSON(w, http.StatusOK, res)
}
