package agent

import (
	"context"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// ScopeLost is the scope of a restore of one work_lost entry by its id.
const ScopeLost = "lost"

// RestoreLost answers POST /v1/continuity/work_lost/{id}/restore: it
// brings back, from the snapshot that held them, the paths of the loss id
// (resume's work_lost[].id, or a loss resume no longer lists: the capture
// keeps the recent ones), as they are named in the tree. The command
// resume gives for a loss is this restore: it names no file, so no name
// (a line break, a quote, bytes that are not UTF-8) has to survive a
// shell. Like every restore it first snapshots the tree as it is.
func (a *Agent) RestoreLost(ctx context.Context, id string, body []byte) (RestoreAnswer, error) {
	req, err := guard.DecodeLostRestoreRequest(body)
	if err != nil {
		return RestoreAnswer{}, err
	}
	l, ok := a.capture.Lost(id)
	if !ok {
		return RestoreAnswer{}, capsule.Refuse(capsule.CodeNotFound, "id",
			"agent %s knows no lost work %s: resume's work_lost gives the id of each loss", a.name, termsafe.Name(id))
	}
	if len(l.Versions) > 0 && a.versions != nil {
		return a.restoreLostVersions(ctx, l, req.DryRun)
	}
	ans, err := a.restore(ctx, l.Snapshot, &guard.RestoreRequest{Paths: l.Paths, DryRun: req.DryRun})
	if err == nil {
		ans.Scope = ScopeLost
	}
	exactPaths(&ans)
	return ans, err
}

// restoreLostVersions brings a loss back at the newest versions the
// version journal kept (what stood just before it vanished), and the
// paths it kept none newer of from the loss's snapshot. Each version's
// restore snapshots the tree first; the first safety snapshot undoes
// them all.
func (a *Agent) restoreLostVersions(ctx context.Context, l capsule.WorkLost, dryRun bool) (RestoreAnswer, error) {
	byPath := map[string]string{}
	for _, v := range l.Versions {
		name := v.Path
		if n, err := termsafe.ParseExact(v.Path); err == nil {
			name = n
		}
		byPath[name] = v.Version
	}
	var rest []string
	for _, p := range l.Paths {
		if n, err := termsafe.ParseExact(p); err == nil && byPath[n] != "" || byPath[p] != "" {
			continue
		}
		rest = append(rest, p)
	}
	ans := RestoreAnswer{Scope: ScopeLost}
	ans.Snapshot, ans.DryRun = l.Snapshot, dryRun
	merge := func(r RestoreAnswer) {
		if ans.Safety == "" {
			ans.Safety, ans.SafetyNew = r.Safety, r.SafetyNew
		}
		ans.Changes = append(ans.Changes, r.Changes...)
		ans.Refused = append(ans.Refused, r.Refused...)
	}
	if len(rest) > 0 {
		r, err := a.restore(ctx, l.Snapshot, &guard.RestoreRequest{Paths: rest, DryRun: dryRun})
		if err != nil {
			exactPaths(&r)
			return r, err
		}
		merge(r)
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		var r RestoreAnswer
		_, err := a.capture.Restoring(func() (snapshot.RestoreResult, error) {
			var err error
			r.RestoreResult, _, err = a.versions.Restore(ctx, p, byPath[p], time.Time{}, dryRun)
			return r.RestoreResult, err
		})
		if err != nil {
			exactPaths(&ans)
			return ans, snapErr(err)
		}
		merge(r)
	}
	if ans.Changes == nil {
		ans.Changes = []snapshot.FileChange{}
	}
	exactPaths(&ans)
	return ans, nil
}

// exactPaths puts the names of a restore's answer in their exact form
// (termsafe.Exact): JSON would turn a name that is not UTF-8 into U+FFFD,
// and the name shown would no longer be the file's, nor one --path takes
// back.
func exactPaths(ans *RestoreAnswer) {
	for i := range ans.Changes {
		ans.Changes[i].Path = termsafe.Exact(ans.Changes[i].Path)
	}
	for i := range ans.Refused {
		ans.Refused[i].Path = termsafe.Exact(ans.Refused[i].Path)
	}
	for i := range ans.LeftAlone {
		ans.LeftAlone[i].Path = termsafe.Exact(ans.LeftAlone[i].Path)
	}
}
