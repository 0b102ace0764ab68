package snapshot

import (
	"context"

	"github.com/continuityd/continuityd/daemon/snapshot/restore"
)

// Restoring snapshots (restore).

// HoldRestoreEnv is a test hook, read by Open: "POINT FIFO" holds every
// restore of the store at POINT until the test lets it go (see
// restore.HoldEnv).
const HoldRestoreEnv = restore.HoldEnv

// Restore brings the files of snapshot id back into the workdir: all of
// them, or only those under paths (relative to the workdir). It first
// takes a safety snapshot of the tree as it is, so every restore can be
// undone. A dry run changes nothing and lists what would change. Files no
// snapshot holds (ignored, too large) are never overwritten or removed. A
// path that is absolute, climbs out with "..", names .git, or passes
// through a symbolic link is refused (a *capsule.Error naming it) and
// nothing changes; so is one that names nothing in the snapshot or the
// tree. The snapshot's whole tree is checked first (verify), by a dry run
// too: a forged or damaged one is refused, not half restored.
//
// Every file is read, written and removed through directory handles
// opened beneath the workdir, never through a symbolic link, in the
// directory Open found (a workdir path that leads elsewhere now is
// refused); the restore is journaled, and one interrupted is finished at
// the next Open (package restore).
func (s *Store) Restore(ctx context.Context, id string, paths []string, dryRun bool) (RestoreResult, error) {
	res, err := s.restore.Restore(ctx, id, paths, dryRun)
	return restoreResultOf(res), err
}

// Interrupted is the interrupted restore the store found (at Open, or a
// restore that failed part way), until a restore succeeds after it or a
// week passed; ok is false when there is none.
func (s *Store) Interrupted() (InterruptedRestore, bool) {
	return s.restore.Interrupted()
}

// InterruptedChanges are the files the interrupted restore found at Open
// was to change (the finish changed those still to do), each in its exact
// form (termsafe.Exact), for a caller that must not take what they lost
// for lost work; nil when Open found none.
func (s *Store) InterruptedChanges() []string { return s.restore.InterruptedChanges() }

// restoreResultOf is res as the answers give it.
func restoreResultOf(res restore.Result) RestoreResult {
	out := RestoreResult{Snapshot: res.Snapshot, DryRun: res.DryRun, Safety: res.Safety, SafetyNew: res.SafetyNew,
		Changes: fileChangesOf(res.Changes)}
	if res.Refused != nil {
		out.Refused = make([]Refusal, len(res.Refused))
		for i, r := range res.Refused {
			out.Refused[i] = Refusal(r)
		}
	}
	return out
}
