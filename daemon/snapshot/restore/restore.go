package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
	"github.com/continuityd/continuityd/daemon/snapshot/verify"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// Options configure a Restorer.
type Options struct {
	Repo    *repo.Repo
	Lock    *repo.WriteLock // the store's writer lock
	Take    *take.Taker     // the safety snapshot
	Verify  *verify.Checker // a snapshot's tree, before anything is written
	Workdir *workdir.Workdir
	// ExcludeAbs are the absolute paths in the workdir no restore
	// writes (the store, the state directory).
	ExcludeAbs []string
	Log        *slog.Logger
	Now        func() time.Time
}

// Restorer brings snapshots back into one workdir, one restore at a time
// (the writer lock).
type Restorer struct {
	repo       *repo.Repo
	git        *repo.Git
	lock       *repo.WriteLock
	take       *take.Taker
	verify     *verify.Checker
	workdir    *workdir.Workdir
	dir        string // the store
	work       string // the workdir's path
	excludeAbs []string
	log        *slog.Logger
	now        func() time.Time
	// hook, when set (by tests: HoldEnv), runs at each point of a
	// restore (hold), so a test can kill the process there.
	hook func(point string)
	// interrupted is the interrupted restore reported (journal.go);
	// interruptedPaths the files of the one FinishInterrupted found.
	interrupted      atomic.Pointer[Interrupted]
	interruptedPaths []string
}

// New restores into opt.Workdir from opt.Repo. HoldEnv, when set, holds
// its restores for tests.
func New(opt Options) *Restorer {
	return &Restorer{repo: opt.Repo, git: opt.Repo.Git(), lock: opt.Lock, take: opt.Take, verify: opt.Verify,
		workdir: opt.Workdir, dir: opt.Repo.Dir(), work: opt.Workdir.Path(), excludeAbs: opt.ExcludeAbs,
		log: opt.Log, now: opt.Now, hook: holdFromEnv()}
}

// Result says what a restore changed (or, in a dry run, would).
type Result struct {
	Snapshot string // the snapshot restored from
	DryRun   bool
	// Safety is the snapshot of the tree as it was before the restore (a
	// new one, or the newest when the tree had not changed since):
	// restoring it undoes this restore. Empty in a dry run.
	Safety    string
	SafetyNew bool
	// Changes are the files the restore writes or removes: "added" (comes
	// back), "modified" (content, mode or type changes), "deleted" (is
	// removed: it is not in the snapshot).
	Changes []repo.FileChange
	// Refused are files the restore leaves alone, with the reason.
	Refused []Refusal
}

// Refusal is a file a restore left alone.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Restore brings the files of snapshot id back into the workdir: all of
// them, or only those under paths (relative to the workdir). It first
// takes a safety snapshot of the tree as it is, so every restore can be
// undone. A dry run changes nothing and lists what would change. Files no
// snapshot holds (ignored, too large) are never overwritten or removed. A
// path that is absolute, climbs out with "..", names .git, or passes
// through a symbolic link is refused (a *capsule.Error naming it) and
// nothing changes; so is one that names nothing in the snapshot or the
// tree (checkKnown). The snapshot's whole tree is checked first (verify),
// by a dry run too: a forged or damaged one is refused, not half restored.
//
// Every file is read, written and removed through directory handles
// opened beneath the workdir, never through a symbolic link (workTree),
// in the directory Open found (a workdir path that leads elsewhere now is
// refused: package workdir); the restore is journaled, and one interrupted is
// finished at the next Open (journal.go).
func (rs *Restorer) Restore(ctx context.Context, id string, paths []string, dryRun bool) (Result, error) {
	clean, err := rs.checkPaths(paths)
	if err != nil {
		return Result{}, err
	}
	return rs.restore(ctx, id, clean, dryRun, nil, nil)
}

// restore is Restore with the paths checked; fin is set when it finishes
// an interrupted restore.
func (rs *Restorer) restore(ctx context.Context, id string, clean []string, dryRun bool, fin *finishing, ver *Version) (Result, error) {
	if err := rs.lock.LockOpen(); err != nil {
		return Result{}, err
	}
	defer rs.lock.Unlock()
	top, err := rs.workdir.OpenDir()
	if err != nil {
		return Result{}, err
	}
	w := newWorkTree(top)
	defer w.close()
	for i, c := range clean {
		if link := w.linkOnPath(c); link != "" {
			return Result{}, capsule.Refuse(capsule.CodeInvalidField, fmt.Sprintf("paths[%d]", i),
				"a path through the symbolic link %s (restore the link itself); give a path relative to the workdir %s", link, rs.work)
		}
	}
	target, err := rs.target(ctx, id, fin, ver)
	if err != nil {
		return Result{}, err
	}
	// The whole tree is checked before anything changes, the same way for
	// a dry run: a forged or damaged snapshot is refused whole.
	if err := rs.verify.Tree(ctx, target); err != nil {
		return Result{}, err
	}
	res := Result{Snapshot: target.ID, DryRun: dryRun, Changes: []repo.FileChange{}}

	// What the previous restore wrote is in the tree as it is even when a
	// rule it wrote (".gitignore = *") ignores it: restoring the safety
	// snapshot then puts back, or removes, all of it.
	defer rs.take.DropPack()
	st, err := rs.take.Stage(ctx, rs.readRestored())
	if err != nil {
		return Result{}, err
	}
	changes, err := rs.repo.DiffTree(ctx, st.Tree(), target.Tree, clean...)
	if err != nil {
		return Result{}, err
	}
	changes, res.Refused, err = rs.leaveWithheld(ctx, target, clean, changes)
	if err != nil {
		return Result{}, err
	}
	if err := rs.checkKnown(ctx, clean, changes, res.Refused, st.Tree(), target.Tree, target.ID); err != nil {
		return Result{}, err
	}
	var writes, removes []repo.Change
	for _, c := range changes {
		if fin != nil && !fin.only[c.Path] {
			continue // the interrupted restore did not change it
		}
		if c.OldMode == repo.GitlinkMode || c.NewMode == repo.GitlinkMode {
			res.Refused = append(res.Refused, Refusal{Path: c.Path, Reason: "a nested repository: restore it with its own git"})
			continue
		}
		if c.Status == 'D' {
			removes = append(removes, c)
		} else {
			writes = append(writes, c)
		}
	}
	removing := map[string]bool{}
	for _, c := range removes {
		removing[c.Path] = true
	}
	// Check every file before changing any: nothing that no snapshot holds
	// may be overwritten, removed or replaced by a directory.
	var ok []repo.Change
	for _, c := range writes {
		if reason := w.blocked(c, removing); reason != "" {
			res.Refused = append(res.Refused, Refusal{Path: c.Path, Reason: reason})
			continue
		}
		ok = append(ok, c)
	}
	writes = ok
	for _, c := range removes {
		res.Changes = append(res.Changes, repo.FileChange{Path: c.Path, Status: repo.StatusDeleted})
	}
	for _, c := range writes {
		res.Changes = append(res.Changes, repo.FileChange{Path: c.Path, Status: repo.StatusName(c.Status)})
	}
	slices.SortFunc(res.Changes, func(a, b repo.FileChange) int { return strings.Compare(a.Path, b.Path) })
	if err := rs.countLines(ctx, st.Tree(), target.Tree, clean, res.Changes); err != nil {
		return Result{}, err
	}
	if dryRun {
		return res, nil
	}

	newest, _ := rs.take.Newest()
	safety, isNew, err := rs.take.Commit(ctx, &st, "restore", newest.Seq)
	if err != nil {
		return Result{}, fmt.Errorf("restore: the safety snapshot failed, nothing was changed: %w", err)
	}
	res.Safety, res.SafetyNew = safety.ID, isNew
	if len(res.Changes) == 0 {
		rs.restored(fin)
		return res, nil
	}
	undo := fmt.Sprintf("; the tree as it was is snapshot %s: restore it to undo", repo.Short(safety.ID))
	// Git read the tree for the safety snapshot by the workdir's path:
	// it must still lead to the directory the handles hold.
	if err := rs.workdir.Check(); err != nil {
		return res, err
	}
	// The modes and the blobs are asked for before the first file is
	// removed: a store git cannot read fails here, the workdir untouched.
	var modes map[string]fs.FileMode
	var blobs *repo.BlobStream
	if len(writes) > 0 {
		msg, err := rs.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", target.CommitID()}})
		if err != nil {
			return res, fmt.Errorf("restore: nothing was changed: %w", err)
		}
		modes = repo.ParseModes(string(msg))
		ids := make([]string, len(writes))
		for i, c := range writes {
			ids[i] = c.NewID
		}
		if blobs, err = rs.repo.StreamBlobs(ctx, ids); err != nil {
			return res, fmt.Errorf("restore: nothing was changed: %w", err)
		}
		defer blobs.Close()
	}
	owners := w.ownersBefore(writes)
	head := journalHead{V: 1, ID: newJournalID(), Snapshot: target.ID, Safety: safety.ID, Paths: clean,
		Began: rs.now().UTC(), Workdir: rs.workdir.Real()}
	if ver != nil || fin != nil && fin.prior.Tree != "" {
		head.Tree = target.Tree // a version's: no ref names it
	}
	head.Dev, head.Ino, _ = rs.workdir.ID()
	if fin != nil {
		// The safety snapshot that undoes it all is the first one'rs.
		head.Safety, head.Began = fin.prior.Safety, fin.prior.Began
	}
	for _, c := range removes {
		head.Changes = append(head.Changes, journalChange{Path: c.Path, Remove: true})
	}
	for _, c := range writes {
		head.Changes = append(head.Changes, journalChange{Path: c.Path})
	}
	j, err := rs.startJournal(head)
	if err != nil {
		return res, fmt.Errorf("restore: nothing was changed: %w", err)
	}
	rs.hold("before-first")
	failed := func(err error) (Result, error) {
		j.close()
		rs.stoppedPartWay(head, j.done, err)
		return res, fmt.Errorf("restore: %w%s", err, undo)
	}
	left := map[string]bool{} // paths left alone once the restore began
	step := func(c repo.Change, err error) error {
		var r *errRefused
		if errors.As(err, &r) {
			res.Refused = append(res.Refused, r.Refusal)
			left[c.Path] = true
			err = nil
		}
		if err == nil {
			err = j.progress()
		}
		if err == nil {
			rs.hold(fmt.Sprintf("after-%d", j.done))
		}
		return err
	}
	for _, c := range removes {
		if err := step(c, w.remove(c.Path)); err != nil {
			return failed(err)
		}
	}
	if err := j.note(); err != nil {
		return failed(err)
	}
	var written []repo.Change
	for i, c := range writes {
		err := w.writeFile(c, tempName(head.ID, len(removes)+i), blobs, owners[c.Path], modes)
		if err == nil {
			written = append(written, c)
		}
		if err := step(c, err); err != nil {
			return failed(err)
		}
	}
	if err := j.note(); err != nil {
		return failed(err)
	}
	rs.hold("after-last")
	if len(left) > 0 {
		res.Changes = slices.DeleteFunc(res.Changes, func(f repo.FileChange) bool { return left[f.Path] })
		rs.log.Warn("snapshot restore: files changed while the restore ran were left alone", "files", len(left))
	}
	rs.writeRestored(written)
	// What was written is on disk before the journal goes: a crash after
	// finds either the journal or every file.
	if err := top.SyncFS(); err != nil {
		rs.log.Warn("snapshot restore: the workdir's file system could not be synced", "err", err)
	}
	rs.endJournal(j)
	rs.restored(fin)
	rs.log.Info("snapshot restored", "snapshot", repo.Short(target.ID), "files", len(res.Changes), "safety", repo.Short(safety.ID))
	return res, nil
}

// restored notes a restore that succeeded: the journal of one that
// stopped before it, if any, goes (this one superseded it, or finished
// it), and an interrupted one reported is acknowledged (by a restore
// asked for; its own finish acknowledges nothing).
func (rs *Restorer) restored(fin *finishing) {
	if err := os.Remove(filepath.Join(rs.dir, JournalFile)); err == nil {
		atomicfile.SyncDir(rs.dir)
	}
	if fin == nil && rs.interrupted.Load() != nil {
		rs.setInterrupted(nil)
	}
}

// stoppedPartWay reports a restore that failed after its first change
// (a full disk, a file system error): its journal stays, and the next
// start finishes it.
func (rs *Restorer) stoppedPartWay(head journalHead, done int, err error) {
	r := head.report(done, rs.now().UTC())
	r.Problem = "it stopped part way (" + err.Error() + "); the next start of the daemon finishes it"
	rs.setInterrupted(&r)
	rs.log.Warn("snapshot restore stopped part way; the next start finishes it, and the safety snapshot undoes it",
		"snapshot", repo.Short(head.Snapshot), "safety", repo.Short(head.Safety), "done", done, "files", len(head.Changes), "err", err)
}

// owner is who owns a file.
type owner struct{ uid, gid int }

// ownersBefore records, before a restore writes, who is to own what it
// writes: each file the owner of the file it replaces, each new one the
// owner of the workdir (the directories it makes too: mkdirs). Only a
// daemon running as root sets owners (its files would be root's
// otherwise).
func (w *workTree) ownersBefore(writes []repo.Change) map[string]owner {
	owners := make(map[string]owner, len(writes))
	for _, c := range writes {
		o := w.owner
		if fi, err := w.lstat(c.Path); err == nil {
			if uid, gid, ok := workdir.OwnerOf(fi); ok {
				o = owner{uid, gid}
			}
		}
		owners[c.Path] = o
	}
	return owners
}

// restoredFile lists (NUL-separated) the files the last restore wrote.
const restoredFile = "restored.paths"

// readRestored returns the files the last restore wrote.
func (rs *Restorer) readRestored() []string {
	b, err := os.ReadFile(filepath.Join(rs.dir, restoredFile))
	if err != nil {
		return nil
	}
	var list []string
	for p := range strings.SplitSeq(string(b), "\x00") {
		if p != "" {
			list = append(list, p)
		}
	}
	return list
}

// writeRestored records the files a restore wrote, and has the next Take
// drop those an ignore rule covers (the safety snapshot of the next restore
// holds them anyway).
func (rs *Restorer) writeRestored(writes []repo.Change) {
	var b bytes.Buffer
	for _, c := range writes {
		b.WriteString(c.Path)
		b.WriteByte(0)
	}
	if err := atomicfile.WriteFile(filepath.Join(rs.dir, restoredFile), b.Bytes(), 0o600); err != nil {
		rs.log.Warn("snapshot store: the files a restore wrote could not be recorded; undoing it may leave some that are ignored", "err", err)
	}
	rs.take.RecheckIgnored()
}

// checkPaths checks the paths a restore is limited to and returns them
// clean, relative, with "/" (in their order: restore refuses one through
// a symbolic link by its index). "." alone means the whole tree.
func (rs *Restorer) checkPaths(paths []string) ([]string, error) {
	var clean []string
	for i, p := range paths {
		field := fmt.Sprintf("paths[%d]", i)
		refuse := func(why string) error {
			return capsule.Refuse(capsule.CodeInvalidField, field, "%s; give a path relative to the workdir %s", why, rs.work)
		}
		switch {
		case p == "":
			return nil, refuse("an empty path")
		case strings.Contains(p, "\x00"):
			return nil, refuse("a path with a NUL")
		case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
			return nil, refuse("an absolute path")
		}
		c := path.Clean(filepath.ToSlash(p))
		if c == ".." || strings.HasPrefix(c, "../") {
			return nil, refuse("a path outside the workdir")
		}
		if c == "." {
			return nil, nil // the whole tree
		}
		for seg := range strings.SplitSeq(c, "/") {
			if strings.EqualFold(seg, ".git") {
				return nil, refuse("a path in a .git directory, which snapshots never hold")
			}
		}
		abs := filepath.Join(rs.work, filepath.FromSlash(c))
		for _, ex := range rs.excludeAbs {
			if _, in := repo.Inside(ex, abs); in {
				return nil, refuse("a path in the daemon's own directory")
			}
		}
		clean = append(clean, c)
	}
	return clean, nil
}

// countLines gives each of changes (from tree from to tree to) its line
// counts, or marks it binary.
func (rs *Restorer) countLines(ctx context.Context, from, to string, paths []string, changes []repo.FileChange) error {
	counted, _, err := rs.repo.FileChanges(ctx, from, to, math.MaxInt, paths...)
	if err != nil {
		return err
	}
	byPath := make(map[string]repo.FileChange, len(counted))
	for _, f := range counted {
		byPath[f.Path] = f
	}
	for i := range changes {
		if f, ok := byPath[changes[i].Path]; ok {
			changes[i].LinesAdded, changes[i].LinesDeleted, changes[i].Binary = f.LinesAdded, f.LinesDeleted, f.Binary
		}
	}
	return nil
}

// blocked says why a file of the snapshot cannot be written, or "".
func (w *workTree) blocked(c repo.Change, removing map[string]bool) string {
	segs := strings.Split(c.Path, "/")
	for i := range segs {
		rel := strings.Join(segs[:i+1], "/")
		fi, err := w.lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			return fmt.Sprintf("%s cannot be read: %v", rel, err)
		}
		lastSeg := i == len(segs)-1
		switch {
		case removing[rel]:
			return "" // a snapshotted file that the restore removes first
		case !lastSeg && fi.IsDir():
			continue
		case !lastSeg && fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Sprintf("%s is a symbolic link where the snapshot has a directory, and is in no snapshot; it is not followed: move it away first", rel)
		case !lastSeg:
			return fmt.Sprintf("%s is in the way and is in no snapshot (ignored or too large); move it away first", rel)
		case fi.IsDir() && !w.emptiedBy(rel, removing):
			return "a directory is in the way; move it away first"
		case fi.IsDir():
			return "" // its files are all removed first, and it with them
		case c.Status == 'A':
			// It exists but was not in the tree as it is: ignored, too
			// large, or unreadable. Overwriting it could not be undone.
			return "a file that is in no snapshot (ignored or too large) is in the way; move it away first"
		}
	}
	return ""
}
