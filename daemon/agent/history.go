package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// ScopeVersion is a restore of one version of one file.
const ScopeVersion = "version"

// useVersions feeds the store's version journal from the watcher, when
// the store has one in this process.
func (a *Agent) useVersions(st SnapshotStore) {
	s, ok := st.(*snapshot.Store)
	if !ok || s.Versions == nil {
		return
	}
	a.versions = s.Versions
	a.capture.UseJournal(s.Versions)
}

// journal is the version journal, or why there is none.
func (a *Agent) journal() (*snapshot.Versions, error) {
	if a.versions != nil {
		return a.versions, nil
	}
	if _, err := a.snapStore(); err != nil {
		return nil, err
	}
	return nil, capsule.Refuse(capsule.CodeSnapshotsOff, "", "%s", a.journalOff())
}

// journalOff says why a workdir whose snapshots are kept has no version
// journal.
func (a *Agent) journalOff() string {
	if s, ok := a.snaps.(*snapshot.Store); ok && s.VersionsProblem != "" {
		return s.VersionsProblem
	} else if !ok {
		return "the version journal is not kept for a workdir whose store runs as its owner (a root daemon over another user's tree)"
	}
	return "the version journal is off ([snapshots] journal = false)"
}

// JournalHealth is the version journal's line in status: ok, or off and
// why, so that a place without history says so before history is asked.
func (a *Agent) JournalHealth() ops.Component {
	h := ops.Component{Name: "journal", State: "off"}
	switch {
	case a.versions != nil:
		h.State = "ok"
	case a.snaps == nil:
		h.Detail = "work snapshots are off: the journal lives in their store"
	default:
		h.Detail = a.journalOff()
		if s, ok := a.snaps.(*snapshot.Store); ok && s.VersionsProblem != "" {
			h.State = "degraded"
		}
	}
	return h
}

// checkFile reads a file's name as the API gives it (exact form),
// relative to the workdir.
func checkFile(field, p string) (string, error) {
	name, err := termsafe.ParseExact(p)
	if err != nil || name == "" {
		return "", capsule.Refuse(capsule.CodeInvalidQuery, field, "give the file, relative to the workdir (history PATH)")
	}
	return name, nil
}

// History answers GET /v1/history?path=P.
func (a *Agent) History(ctx context.Context, p string) (ops.HistoryAnswer, error) {
	v, err := a.journal()
	if err != nil {
		return ops.HistoryAnswer{}, err
	}
	name, err := checkFile("path", p)
	if err != nil {
		return ops.HistoryAnswer{}, err
	}
	name = a.relToWorkdir(name)
	h, err := v.History(ctx, name)
	if err != nil {
		return ops.HistoryAnswer{}, snapErr(err)
	}
	ans := ops.HistoryAnswer{Agent: a.name, Path: termsafe.Exact(name), Versions: make([]ops.HistoryVersion, 0, len(h.Versions)),
		Thinned: h.Thinned.String(), ThinnedCount: h.Thinned.Count, ThinnedByAge: h.Thinned.ByAge,
		ThinnedByBytes: h.Thinned.ByBytes, Damaged: h.Damaged}
	if h.Thinned.Count > 0 {
		from, to := h.Thinned.First.UTC(), h.Thinned.Last.UTC()
		ans.ThinnedFrom, ans.ThinnedTo = &from, &to
	}
	for _, ver := range h.Versions {
		ans.Versions = append(ans.Versions, a.wireVersion(name, ver))
	}
	if problem := v.J.Problem(); problem != "" {
		ans.Note = problem
	}
	return ans, nil
}

// wireVersion is a version as the API gives it, who labelled for this
// agent: the ledger's word when it has one now (a hook slower than the
// journal credits the change later), else the journal's.
func (a *Agent) wireVersion(p string, v snapshot.Version) ops.HistoryVersion {
	by := v.By
	if l := a.capture.AttributionLedger(); l != nil {
		if now, ok := l.WhoAt(p, v.At); ok {
			by = now
		}
	}
	w := ops.HistoryVersion{ID: v.ID, At: v.At, Size: v.Size, Lines: v.Lines, LinesDelta: v.LinesDelta,
		By: attribution.Label(a.name, by), Session: v.Session, Snapshot: v.Snapshot, Blob: v.Blob, Gone: v.Gone,
		NotKept: v.NotKept, Executable: v.Executable}
	if !v.Turn.IsZero() {
		turn := v.Turn.UTC()
		w.Turn = &turn
	}
	return w
}

// relToWorkdir takes an absolute path inside the workdir to its relative
// form; other names are left as they are (the store refuses the bad).
func (a *Agent) relToWorkdir(p string) string {
	if rel, ok := cutWorkdir(a.cfg.Workdir, p); ok {
		return rel
	}
	return p
}

// RestoreVersion answers POST /v1/history/restore.
func (a *Agent) RestoreVersion(ctx context.Context, body []byte) (ops.VersionRestoreAnswer, error) {
	req, err := guard.DecodeVersionRestoreRequest(body)
	if err != nil {
		return ops.VersionRestoreAnswer{}, err
	}
	v, err := a.journal()
	if err != nil {
		return ops.VersionRestoreAnswer{}, err
	}
	var at time.Time
	if req.At != "" {
		if at, err = parseWhen(req.At); err != nil {
			return ops.VersionRestoreAnswer{}, err
		}
	}
	p := a.relToWorkdir(req.Path)
	var ans ops.VersionRestoreAnswer
	var ver snapshot.Version
	_, err = a.capture.Restoring(func() (snapshot.RestoreResult, error) {
		var err error
		ans.RestoreResult, ver, err = v.Restore(ctx, p, req.Version, at, req.DryRun)
		return ans.RestoreResult, err
	})
	if ver.ID != "" {
		ans.Version = a.wireVersion(p, ver)
	}
	ans.Scope = ScopeVersion
	if ans.Changes == nil {
		ans.Changes = []snapshot.FileChange{}
	}
	exactPaths(&ans.RestoreAnswer)
	return ans, snapErr(err)
}

// parseWhen reads a time: RFC 3339, or a duration back from now ("90s",
// "5m": that long ago).
func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, capsule.Refuse(capsule.CodeInvalidField, "at",
		"%s is no time: give RFC 3339 (2026-01-02T15:04:05Z, as history prints with --json) or how long ago (90s, 5m)", fmt.Sprintf("%q", s))
}

// cutWorkdir is p relative to workdir when p is absolute and inside it.
func cutWorkdir(workdir, p string) (string, bool) {
	if !filepath.IsAbs(p) || workdir == "" {
		return "", false
	}
	rel, err := filepath.Rel(workdir, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}
