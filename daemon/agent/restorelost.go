package agent

import (
	"context"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
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
	ans, err := a.restore(ctx, l.Snapshot, &guard.RestoreRequest{Paths: l.Paths, DryRun: req.DryRun})
	if err == nil {
		ans.Scope = ScopeLost
	}
	exactPaths(&ans)
	return ans, err
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
