package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/daemon/fleetsnap"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/worklost"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// StoreDir is the agent's snapshot store in its state directory.
const StoreDir = "snapshots.git"

// SnapshotStore is the agent's work snapshot store: *snapshot.Store in
// process, or, when the daemon runs as root over another user's workdir,
// the store in that owner's worker (asowner.Store). The capture and the
// fleet use it too.
type SnapshotStore interface {
	capture.Snapshots
	fleetsnap.Store
	List(ctx context.Context) ([]snapshot.Snapshot, error)
	Diff(ctx context.Context, id, against string, maxBytes int) (string, bool, error)
	DiffView(ctx context.Context, id, against string, maxBytes int, v snapshot.View) (string, bool, error)
	Restore(ctx context.Context, id string, paths []string, dryRun bool) (snapshot.RestoreResult, error)
	Lookup(ctx context.Context, id string) (snapshot.Snapshot, error)
	Newest() (snapshot.Snapshot, bool)
	GCProblem() string
	// Interrupted and InterruptedChanges: an interrupted restore the
	// store found (and finished) as it opened.
	Interrupted() (snapshot.InterruptedRestore, bool)
	InterruptedChanges() []string
	Close() error
}

// OpenSnapshots opens a SnapshotStore as snapshot.Open does.
type OpenSnapshots func(ctx context.Context, opt snapshot.Options) (SnapshotStore, error)

// openInProcess is snapshot.Open as an OpenSnapshots.
func openInProcess(ctx context.Context, opt snapshot.Options) (SnapshotStore, error) {
	st, err := snapshot.Open(ctx, opt)
	if err != nil {
		return nil, err // not a nil *Store in a non-nil interface
	}
	return st, nil
}

// snapOpenTimeout bounds opening (or making) the store: a few git runs.
const snapOpenTimeout = 30 * time.Second

// openSnapshots opens the agent's work snapshot store as o says (nil:
// snapshots are off or the agent has no workdir). A failure (git missing,
// too old, or failing) leaves the agent running with degraded
// ["snapshots"] and the reason logged and given by the snapshot calls.
func (a *Agent) openSnapshots(o *snapshot.Options, open OpenSnapshots) {
	if o == nil {
		return
	}
	so := *o
	if so.Dir == "" {
		so.Dir = filepath.Join(a.dir, StoreDir)
	}
	so.Workdir, so.Logger = a.cfg.Workdir, a.log
	if open == nil {
		open = openInProcess
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapOpenTimeout)
	defer cancel()
	st, err := open(ctx, so)
	if err != nil {
		a.snapErr = err
		a.log.Warn("work snapshots are unavailable for this agent; it runs on, degraded [\"snapshots\"]", "workdir", so.Workdir, "err", err)
		return
	}
	a.snaps = st
	if s, ok := st.Newest(); ok {
		a.newestAtOpen = s
	}
	// The store collects its own garbage, in the background, when it
	// passes its bounds.
	a.capture.UseSnapshots(st, func() {
		a.fsnaps.snapshotTaken() // nil (a no-op) when the fleet does not take snapshots
	})
	a.capture.OnWorkLost(a.workLost)
	a.useVersions(st)
	a.reportInterrupted(st)
}

// reportInterrupted logs the interrupted restore the store found as it
// opened (and finished, or could not), with the command that undoes it;
// what it changed is the daemon's doing, not lost work.
func (a *Agent) reportInterrupted(st SnapshotStore) {
	changed := st.InterruptedChanges()
	ir, ok := st.Interrupted()
	if changed == nil || !ok {
		return
	}
	paths := make([]string, 0, len(changed))
	for _, p := range changed {
		if name, err := termsafe.ParseExact(p); err == nil {
			paths = append(paths, name)
		}
	}
	a.capture.NoteRestored(paths)
	ri := a.restoreInterrupted(ir)
	msg := "a restore of the work tree was interrupted (a kill, a crash or a full disk); it was finished now"
	if !ir.Finished {
		msg = "a restore of the work tree was interrupted (a kill, a crash or a full disk) and is not finished: " + ir.Problem
	}
	a.log.Warn(msg, "snapshot", ir.Snapshot, "safety", ir.Safety, "files", ir.Files, "done", ir.Done, "undo", ri.Undo)
}

// restoreInterrupted is the store's interrupted restore as resume and
// status show it, with the command that undoes it: its safety snapshot
// restored, whole or on the paths the restore was limited to.
func (a *Agent) restoreInterrupted(ir snapshot.InterruptedRestore) *capsule.RestoreInterrupted {
	ri := &capsule.RestoreInterrupted{Snapshot: ir.Snapshot, Safety: ir.Safety, Began: ir.Began, Found: ir.Found,
		Files: ir.Files, Done: ir.Done, Finished: ir.Finished, FinishSafety: ir.FinishSafety, Problem: ir.Problem}
	switch {
	case ir.Safety == "":
	case len(ir.Paths) > 0:
		ri.Undo = worklost.PathsCommand(ir.Safety, a.name, ir.Paths)
	default:
		ri.Undo = worklost.PathsCommand(ir.Safety, a.name, nil) + " --all"
	}
	return ri
}

// SnapshotProblem says why the agent shows degraded ["snapshots"]: the
// store could not be opened, the workdir's path leads elsewhere now, the
// last snapshot or the store's last garbage collection failed; "" when
// nothing is wrong.
func (a *Agent) SnapshotProblem() string {
	switch {
	case a.snapErr != nil:
		return "work snapshots are unavailable: " + a.snapErr.Error()
	case a.snaps != nil && a.snaps.WorkdirProblem() != "":
		return a.snaps.WorkdirProblem()
	case a.capture.SnapshotError() != nil:
		return "the last work snapshot failed: " + a.capture.SnapshotError().Error()
	case a.snaps != nil:
		return a.snaps.GCProblem()
	}
	return ""
}

// workLost tells the wait feed of uncommitted work that vanished.
func (a *Agent) workLost(w capsule.WorkLost) {
	a.feed.Publish(events.Event{Kind: "work_lost", At: w.At,
		Summary: fmt.Sprintf("uncommitted work on %d %s vanished without a commit; restore: %s",
			len(w.Paths), capsule.Plural(len(w.Paths), "path", "paths"), w.Restore),
		Data: w})
}

// snapStore is the store, or the refusal that says why there is none.
func (a *Agent) snapStore() (SnapshotStore, error) {
	if a.snaps != nil {
		return a.snaps, nil
	}
	why := "work snapshots are off ([snapshots] enabled = false)"
	switch {
	case a.snapErr != nil:
		why = "work snapshots are unavailable: " + a.snapErr.Error()
	case a.cfg.Workdir == "":
		why = "agent " + a.name + " has no workdir to snapshot"
	}
	return nil, capsule.Refuse(capsule.CodeSnapshotsOff, "", "%s", why)
}

// SnapshotList answers GET /v1/snapshots: the agent's snapshots, newest
// first.
func (a *Agent) SnapshotList(ctx context.Context) ([]ops.Snapshot, error) {
	st, err := a.snapStore()
	if err != nil {
		return nil, err
	}
	l, err := st.List(ctx)
	out := make([]ops.Snapshot, len(l))
	for i, s := range l {
		out[i] = wireSnapshot(s)
	}
	return out, snapErr(err)
}

// wireSnapshot is a snapshot as the API answers it, without what only the
// store needs of it.
func wireSnapshot(s snapshot.Snapshot) ops.Snapshot {
	return ops.Snapshot{ID: s.ID, Time: s.Time, Trigger: s.Trigger, Seq: s.Seq, Parent: s.Parent,
		Added: s.Added, Modified: s.Modified, Deleted: s.Deleted, Skipped: s.Skipped,
		Conversation: (*ops.Conversation)(s.Conversation), Message: s.Message}
}

// SnapshotTake answers POST /v1/snapshots: a snapshot of the work tree
// now, with the message body gives (checked by g like any text the daemon
// keeps), taken as the automatic ones are (the capture looks for work
// lost after it). An unchanged tree makes none: the newest is answered,
// New false.
func (a *Agent) SnapshotTake(ctx context.Context, g *guard.Guard, body []byte) (ops.TakeAnswer, error) {
	req, err := g.DecodeTakeRequest(body)
	if err != nil {
		return ops.TakeAnswer{}, err
	}
	if _, err := a.snapStore(); err != nil {
		return ops.TakeAnswer{}, err
	}
	snap, isNew, err := a.capture.TakeSnapshot(ctx, req.Message)
	if err != nil {
		return ops.TakeAnswer{}, snapErr(err)
	}
	return ops.TakeAnswer{Snapshot: wireSnapshot(snap), New: isNew}, nil
}

// Latest names the newest snapshot where an id is asked for.
const Latest = ops.Latest

// SnapshotShow answers GET /v1/snapshots/{id}: one snapshot with its files
// (id "latest": the newest).
func (a *Agent) SnapshotShow(ctx context.Context, id string) (ops.Detail, error) {
	st, err := a.snapStore()
	if err != nil {
		return ops.Detail{}, err
	}
	if id == Latest {
		n, ok := st.Newest()
		if !ok {
			return ops.Detail{}, capsule.Refuse(capsule.CodeNotFound, "id", "agent %s has no snapshot yet", a.name)
		}
		id = n.ID
	}
	var d snapshot.Detail
	err = a.orFromFleet(ctx, st, id, func() (err error) { d, err = st.Show(ctx, id); return err })
	if err == nil && len(d.Files) > 0 {
		whose := a.capture.Whose(ctx, d.Snapshot)
		d.Files = slices.Clone(d.Files) // the store may keep the newest's list
		for i := range d.Files {
			d.Files[i].By = whose(d.Files[i].Path)
		}
	}
	return ops.Detail{Snapshot: wireSnapshot(d.Snapshot), Files: d.Files, FilesCut: d.FilesCut, ParentGone: d.ParentGone,
		SkippedFiles: d.SkippedFiles, SkippedMore: d.SkippedMore, Withheld: d.Withheld}, snapErr(err)
}

// DiffAnswer is a snapshot's unified diff.
type DiffAnswer = ops.DiffAnswer

// SnapshotDiff answers GET /v1/snapshots/{id}?diff=1: the unified diff of
// id against its parent (or against), at most maxBytes (0: the default).
// An empty id, or "latest", is the newest snapshot.
func (a *Agent) SnapshotDiff(ctx context.Context, id, against string, maxBytes int) (DiffAnswer, error) {
	return a.SnapshotDiffView(ctx, id, against, maxBytes, snapshot.View{})
}

// SnapshotDiffView is SnapshotDiff showing what v asks for: the files
// under its paths, as the diff or as their line counts.
func (a *Agent) SnapshotDiffView(ctx context.Context, id, against string, maxBytes int, v snapshot.View) (DiffAnswer, error) {
	st, err := a.snapStore()
	if err != nil {
		return DiffAnswer{}, err
	}
	if id == "" || id == Latest {
		n, ok := st.Newest()
		if !ok {
			return DiffAnswer{}, capsule.Refuse(capsule.CodeNotFound, "id", "agent %s has no snapshot yet", a.name)
		}
		id = n.ID
	}
	var diff string
	var cut bool
	err = a.orFromFleet(ctx, st, id, func() (err error) { diff, cut, err = st.DiffView(ctx, id, against, maxBytes, v); return err })
	if err != nil {
		return DiffAnswer{}, snapErr(err)
	}
	return DiffAnswer{ID: id, Against: against, Diff: diff, Cut: cut}, nil
}

// SnapshotRestore answers POST /v1/snapshots/{id}/restore: body (strict
// JSON, may be empty) names the paths, or all of the tree, and asks for a
// dry run; with neither paths nor all, only the paths this agent changed
// since the snapshot are restored (restoreMine). A restore first snapshots
// the tree as it is, so it can be undone.
func (a *Agent) SnapshotRestore(ctx context.Context, id string, body []byte) (RestoreAnswer, error) {
	req, err := guard.DecodeRestoreRequest(body)
	if err != nil {
		return RestoreAnswer{}, err
	}
	ans, err := a.restore(ctx, id, req)
	exactPaths(&ans)
	return ans, err
}

// restore is SnapshotRestore of a decoded request (paths as they are
// named in the tree).
func (a *Agent) restore(ctx context.Context, id string, req *guard.RestoreRequest) (RestoreAnswer, error) {
	st, err := a.snapStore()
	if err != nil {
		return RestoreAnswer{}, err
	}
	var ans RestoreAnswer
	err = a.orFromFleet(ctx, st, id, func() (err error) {
		// Through the capture: what the daemon's own restore changes is not
		// lost work.
		_, err = a.capture.Restoring(func() (snapshot.RestoreResult, error) {
			var err error
			switch {
			case len(req.Paths) > 0:
				ans = RestoreAnswer{Scope: ScopePaths}
				ans.RestoreResult, err = st.Restore(ctx, id, req.Paths, req.DryRun)
			case req.All:
				ans = RestoreAnswer{Scope: ScopeAll}
				ans.RestoreResult, err = st.Restore(ctx, id, nil, req.DryRun)
			default:
				ans, err = a.restoreMine(ctx, st, id, req.DryRun)
			}
			return ans.RestoreResult, err
		})
		return err
	})
	if err != nil {
		return ans, snapErr(err)
	}
	if ans.Changes == nil {
		ans.Changes = []snapshot.FileChange{}
	}
	return ans, nil
}

// snapErr passes refusals (*capsule.Error) through and names anything else
// as the store failing.
func snapErr(err error) error {
	var ce *capsule.Error
	if err == nil || errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, snapshot.ErrClosed) {
		return capsule.Refuse(capsule.CodeShuttingDown, "", "the agent is stopping; retry in a moment")
	}
	return capsule.Refuse(capsule.CodeSnapshotsOff, "", "the snapshot store failed: %v", err)
}
