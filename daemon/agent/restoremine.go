package agent

import (
	"context"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/ops"
)

// Scopes of a restore (RestoreAnswer.Scope).
const (
	ScopeMine  = ops.ScopeMine
	ScopePaths = ops.ScopePaths
	ScopeAll   = ops.ScopeAll
)

// RestoreAnswer is what POST /v1/snapshots/{id}/restore did (or, in a dry
// run, would do); LeftAlone is a file a restore of the agent's own paths
// did not touch, and whose change it is (attribution.Label).
type (
	RestoreAnswer = ops.RestoreAnswer
	LeftAlone     = ops.LeftAlone
)

// restoreMine restores, from snapshot id, only the paths this agent
// changed since it was taken, and names the others that differ from it
// with whose they are. It refuses (409 WHOSE_UNKNOWN, nothing changed)
// when who changed what since the snapshot is not known: the workdir is
// not watched (no ledger), or the snapshot is older than the ledger (the
// daemon started after it was taken, so what happened between is no one's
// to tell). Then --path or --all says what to restore.
//
// A path this agent changed is restored even when another agent or a
// person changed it too (after its own change or before): it is this
// agent's work, and the safety snapshot undoes the restore. A file the
// ledger has no change of (it forgets the least recently changed paths
// past its bound) is left alone as outside's: the restore errs towards
// touching less.
func (a *Agent) restoreMine(ctx context.Context, st SnapshotStore, id string, dryRun bool) (RestoreAnswer, error) {
	ans := RestoreAnswer{Scope: ScopeMine}
	ledger := a.capture.AttributionLedger()
	if ledger == nil {
		return ans, capsule.Refuse(capsule.CodeWhoseUnknown, "all",
			"who changed what in %s is not known (its workdir is not watched: [watch] enabled = false), so a restore cannot keep to agent %s's own files; name them with --path (paths), or restore the whole tree with --all (all)",
			a.cfg.Workdir, a.name)
	}
	snap, err := st.Lookup(ctx, id)
	if err != nil {
		return ans, err
	}
	if !ledger.Knows(snap.Time) {
		return ans, capsule.Refuse(capsule.CodeWhoseUnknown, "all",
			"snapshot %s was taken at %s, before the daemon began to follow who changes what in %s (at %s): what changed between is no one's to tell, so a restore cannot keep to agent %s's own files; name them with --path (paths), or restore the whole tree with --all (all)",
			short(snap.ID), snap.Time.UTC().Format(time.RFC3339), a.cfg.Workdir, ledger.Since().UTC().Format(time.RFC3339), a.name)
	}
	// What a whole restore would change, to name what this one leaves.
	whole, err := st.Restore(ctx, snap.ID, nil, true)
	if err != nil {
		return ans, err
	}
	credited := ledger.ChangedBy(a.name, snap.Time)
	// Only files the whole restore would change, named as it names them:
	// a directory the ledger credits (one the agent made) is not restored
	// whole over files others put in it.
	var mine []string
	isMine := map[string]bool{}
	for _, c := range whole.Changes {
		if _, ok := slices.BinarySearch(credited, c.Path); ok {
			mine = append(mine, c.Path)
			isMine[c.Path] = true
		}
	}
	whose := map[string][]string{}
	for _, c := range ledger.ChangesSince(snap.Time) {
		if l := attribution.Label(a.name, c.By); !slices.Contains(whose[c.Path], l) {
			whose[c.Path] = append(whose[c.Path], l)
		}
	}
	for _, c := range whole.Changes {
		if isMine[c.Path] {
			continue
		}
		by := whose[c.Path]
		if len(by) == 0 {
			by = []string{attribution.LabelOutside} // a change no agent's tool claimed
		}
		for _, b := range by {
			if b != attribution.LabelSelf {
				ans.LeftAlone = append(ans.LeftAlone, LeftAlone{Path: c.Path, By: b})
			}
		}
	}
	if len(mine) == 0 {
		ans.RestoreResult = snapshot.RestoreResult{Snapshot: snap.ID, DryRun: dryRun, Changes: []snapshot.FileChange{}}
		return ans, nil
	}
	ans.RestoreResult, err = st.Restore(ctx, snap.ID, mine, dryRun)
	return ans, err
}

// short is a snapshot id as people read it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
