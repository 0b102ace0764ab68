package take

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// Options configure a Taker.
type Options struct {
	Repo    *repo.Repo
	Lock    *repo.WriteLock // the store's writer lock
	Workdir *workdir.Workdir
	Notes   *Notes // what the watcher says changed
	// Ignore holds gitignore-style patterns of the workdir's (their lines
	// in the store's info/exclude); IgnoreDirs directory names left out
	// at any depth; ExcludeAbs absolute paths left out (the store, the
	// state directory: repo.BaseExclude).
	IgnoreDirs   []string
	ExcludeAbs   []string
	MaxFileBytes int64 // a larger file is skipped and named; negative: no limit
	Log          *slog.Logger
	Now          func() time.Time
	// Newest is the newest snapshot when the store opened (N == 0: none)
	// and NewestModes its mode lines.
	Newest      repo.Snapshot
	NewestModes string
	// Made is told of each snapshot made, with the writer lock held.
	Made func(Made)
}

// Made is a snapshot a Take (or a restore's safety snapshot) just made,
// with what the Take learned of it on the way.
type Made struct {
	Snapshot repo.Snapshot
	Skipped  []repo.Skipped // the files it left out
	// Files are the files it changed with their line counts, when the
	// Take counted them (a Take from what changed); nil otherwise.
	Files []repo.FileChange
	// Changes are its changes against the snapshot before it (whose tree
	// is From), when the Take listed them (a Take from what changed); nil
	// otherwise.
	Changes []repo.Change
	From    string
	// Added bounds the bytes it added to the store; negative: not known.
	Added int64
}

// Hooks are for tests: they hold a Take, or make it the way it was before
// a shortcut, so a test can look at it there or compare.
type Hooks struct {
	// Step runs as each step of a Take begins (Progress mid-Take).
	Step func(step string)
	// Point runs at each point where a Take changes the store in process
	// (PointBlobs…): a test kills the process there.
	Point func(point string)
	// FirstByGit has a first snapshot staged by git add, as before
	// first.go.
	FirstByGit bool
	// FirstPackObjects, when not 0, bounds a first snapshot's packs.
	FirstPackObjects int
}

// Taker takes the snapshots of one store, one at a time (the writer
// lock), and keeps what it learned of the tree for the next.
type Taker struct {
	repo         *repo.Repo
	git          *repo.Git
	lock         *repo.WriteLock
	workdir      *workdir.Workdir
	work         string // the workdir's path
	maxFileBytes int64
	log          *slog.Logger
	now          func() time.Time
	notes        *Notes
	made         func(Made)
	pipes        *repo.Pipes // long-lived git processes

	walk  walker       // the size walk
	sizes oversize     // what is left out for its size
	index privateIndex // the private index's state
	objs  takeObjects  // the objects a Take writes
	fast  fromChanged  // a Take from what changed
	first firstWriter  // a first snapshot

	// Hooks are for tests.
	Hooks Hooks

	// conversation says where the conversation stands (SetConversation).
	conversation atomic.Pointer[func() repo.Conversation]
	// What a Take under way is doing, for Progress (read from any
	// goroutine): its step ("" when none) and the files the walk found.
	step      atomic.Pointer[string]
	stepFiles atomic.Int64

	newest      repo.Snapshot // newest.N == 0: no snapshot yet
	newestModes string        // its mode lines (repo.FormatModes)
	walkState   *treeState    // what the last Take's walk found; nil before the first
}

// New is the Taker of the store opt.Repo.
func New(opt Options) *Taker {
	t := &Taker{repo: opt.Repo, git: opt.Repo.Git(), lock: opt.Lock, workdir: opt.Workdir, work: opt.Workdir.Path(),
		maxFileBytes: opt.MaxFileBytes, log: opt.Log, now: opt.Now, notes: opt.Notes, made: opt.Made,
		newest: opt.Newest, newestModes: opt.NewestModes}
	t.pipes = repo.NewPipes(opt.Repo, t.stopIdle)
	t.walk = walker{work: t.work, ignoreDirs: opt.IgnoreDirs, excludeAbs: opt.ExcludeAbs, maxFileBytes: opt.MaxFileBytes, files: &t.stepFiles}
	t.sizes = oversize{git: t.git, pipes: t.pipes, dir: opt.Repo.Dir(), work: t.work, files: map[string]int64{}, ignored: map[string]int64{}}
	// The ignore rules may have changed since the last run.
	t.index = privateIndex{git: t.git, work: t.work, fixIgnored: true}
	t.objs = takeObjects{repo: opt.Repo, index: &t.index}
	t.fast = fromChanged{t: t}
	t.first = firstWriter{t: t}
	return t
}

// Progress is what a Take under way is doing: Step is "" when none is,
// else StepWalk (Files counts the files found so far), StepStore (Files
// is how many the walk found) or StepTree.
type Progress struct {
	Step  string
	Files int64
}

// The steps of a Take, for Progress.
const (
	StepWalk  = "walking the tree"
	StepStore = "storing the files"
	StepTree  = "writing the tree"
)

// Timings are the phases of one Take.
type Timings struct {
	Walk   time.Duration // the size walk of the workdir (or of the changed paths)
	Add    time.Duration // the files stored: git add -A into the private index, or read and written in process
	Tree   time.Duration // the trees: git write-tree and the diff against the parent, or written in process
	Commit time.Duration // the commit and its ref
	Total  time.Duration
	// Files is how many files the walk found in the workdir (a snapshot
	// stores them all, less those skipped); in a Take from what changed,
	// in the changed paths only.
	Files int64
	// Incremental is set when the Take looked at the changed paths only
	// (NoteChanged), Paths of them.
	Incremental bool
	Paths       int
}

var triggerRE = lazyregexp.New(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Stage writes the work tree into the store for a snapshot that adds the
// whole tree again, with the files of force that exist (even those an
// ignore rule covers): a restore's safety snapshot. The caller holds the
// writer lock, and drops what a snapshot not made wrote (DropPack).
func (t *Taker) Stage(ctx context.Context, force []string) (Staged, error) {
	return t.stage(ctx, force, changeNotes{unknown: true})
}

// DropPack drops the objects a Take collected that made no snapshot. The
// caller holds the writer lock.
func (t *Taker) DropPack() { t.objs.drop() }

// Newest is the newest snapshot (N == 0: none yet) and its mode lines.
// The caller holds the writer lock.
func (t *Taker) Newest() (repo.Snapshot, string) { return t.newest, t.newestModes }

// RecheckIgnored has the next full add drop from the private index the
// files an ignore rule covers (a restore wrote files it may not have
// tracked). The caller holds the writer lock.
func (t *Taker) RecheckIgnored() { t.index.fixIgnored = true }

// PackedReads is how many objects Takes read from packs (tests look). The
// caller holds the writer lock.
func (t *Taker) PackedReads() int { return t.pipes.PackedReads() }

// Take snapshots the workdir. When the tree is the same as the newest
// snapshot's, it makes none and returns the newest with false. trigger
// names the cause (lower case letters, digits, "_", "-", "."); seq is the
// residency seq the snapshot belongs to; note is the message it was asked
// for with ("" : none), already checked by the caller.
func (t *Taker) Take(ctx context.Context, trigger string, seq uint64, note string) (repo.Snapshot, Timings, bool, error) {
	if !triggerRE.MatchString(trigger) {
		return repo.Snapshot{}, Timings{}, false, capsule.Refuse(capsule.CodeInvalidField, "trigger",
			"a trigger is 1 to 64 lower-case letters, digits, '_', '-' or '.'")
	}
	if err := t.lock.LockOpen(); err != nil {
		return repo.Snapshot{}, Timings{}, false, err
	}
	defer t.lock.Unlock()
	if err := t.workdir.Check(); err != nil {
		return repo.Snapshot{}, Timings{}, false, err // another directory is not the agent's
	}
	start := time.Now()
	defer t.DropPack() // what a Take that made no snapshot wrote
	notes := t.notes.take()
	st, err := t.stage(ctx, nil, notes)
	if err != nil {
		t.notes.keep(notes)
		return repo.Snapshot{}, Timings{}, false, err
	}
	st.note = note
	snap, isNew, err := t.Commit(ctx, &st, trigger, seq)
	if err != nil {
		t.notes.keep(notes)
		return repo.Snapshot{}, Timings{}, false, err
	}
	st.took.Total = time.Since(start)
	return snap, st.took, isNew, nil
}

// Progress says how far the Take under way got; safe from any goroutine,
// while a Take holds the store. A first snapshot of a large tree takes
// seconds: status and the log show it moving.
func (t *Taker) Progress() Progress {
	p := t.step.Load()
	if p == nil || *p == "" {
		return Progress{}
	}
	return Progress{Step: *p, Files: t.stepFiles.Load()}
}

func (t *Taker) setStep(step string) {
	if step == StepWalk {
		t.stepFiles.Store(0)
	}
	t.step.Store(&step)
	if t.Hooks.Step != nil && step != "" {
		t.Hooks.Step(step)
	}
}

// Staged is the work tree as written into the store's objects, not yet
// a snapshot (Commit makes it one).
type Staged struct {
	tree    string
	changes []repo.Change // against the newest snapshot's tree (a Take from what changed)
	counts  diffCounts
	skipped []repo.Skipped
	modes   string // the mode lines of the snapshot's message (modeLines)
	took    Timings
	// files are changes with their line counts, when counted in the same
	// pass (a Take from what changed); nil otherwise.
	files []repo.FileChange
	// added bounds the bytes of the files the add read (the changed
	// paths' regular files); -1 for a full add.
	added int64
	// note is the message the snapshot was asked for with (Take).
	note string
}

// reach runs the test hook at point p.
func (t *Taker) reach(p string) {
	if t.Hooks.Point != nil {
		t.Hooks.Point(p)
	}
}

// stopIdle runs from the idle timer of the long-lived git processes.
func (t *Taker) stopIdle() {
	t.lock.Lock()
	defer t.lock.Unlock()
	t.Release()
}

// Release stops the long-lived git processes, and lets go of what Takes
// from what changed keep between them (parsed trees, the compressor): an
// idle daemon holds none of it. The caller holds the writer lock.
func (t *Taker) Release() {
	t.fast.trees, t.objs.zw = treeCache{}, repo.Compressors{}
	t.pipes.Stop()
}

// staged is the type's own name inside the package.
type staged = Staged

// Tree is the tree staged.
func (st *Staged) Tree() string { return st.tree }

// maxCountedPaths bounds the changed paths of a Take that counts lines
// as it compares trees: counting reads every changed file, which a
// first snapshot (every file added) must not pay for.
const maxCountedPaths = 1000

// stage writes the work tree, as the snapshot rules see it, into the
// store: the size walk, the exclusions, `git add -A` into the private
// index, `git write-tree`. With notes that vouch for what changed since
// the last Take, the walk and the add look at those paths only (see
// notes.go). The files of force that exist are added even when an
// ignore rule covers them (a restore's safety snapshot holds what the
// previous restore wrote).
func (t *Taker) stage(ctx context.Context, force []string, notes changeNotes) (staged, error) {
	var st staged
	if t.git.Failed() {
		t.repo.ClearStaleLocks() // a git run failed since the last Take
	}

	began := time.Now()
	t.setStep(StepWalk)
	defer t.setStep("")
	var roots []string
	incremental := false
	if t.walkState != nil {
		roots, incremental = t.walk.changedRoots(notes)
	}
	var found walked
	var err error
	if incremental {
		found, err = t.walk.walkChanged(roots, t.sizes.files, t.sizes.ignored, t.walkState)
	} else {
		found, err = t.walk.walk()
	}
	if err != nil {
		return st, err
	}
	over := found.over
	st.took.Walk = time.Since(began)
	st.took.Files = t.stepFiles.Load()
	st.took.Incremental = incremental
	st.took.Paths = len(roots)
	st.added = -1
	if incremental {
		st.added = found.bytes
	}

	began = time.Now()
	t.setStep(StepStore)
	if incremental {
		t.objs.begin()
		fast, err := t.stageFromChanged(ctx, roots, found)
		if err == nil {
			tree := fast.took.Tree
			fast.took, fast.added = st.took, st.added
			fast.took.Add, fast.took.Tree = time.Since(began)-tree, tree
			return fast, nil
		}
		t.objs.drop()
		if !errors.Is(err, errNotFast) {
			return st, err
		}
		// The whole tree is added instead, with the same walk (the
		// changed paths' findings merged into the last full walk's).
		st.took.Incremental, st.added = false, -1
	}
	if err := t.index.sync(ctx); err != nil {
		return st, err
	}
	t.Release() // check-ignore read the rules as they were
	if err := t.sizes.exclude(ctx, over, false); err != nil {
		return st, err
	}
	st.skipped = append(st.skipped, t.sizes.skipped()...)
	odd, err := t.notIgnored(ctx, found.odd, t.sizes.ignoredOf)
	if err != nil {
		return st, err
	}
	st.skipped = append(st.skipped, odd...)
	// A store whose index holds nothing yet (its first snapshot) tracks
	// nothing the rules could cover: no ignore fix, and the tree's files
	// are all added (no diff against the empty tree to count them).
	before := t.index.entries()
	if before == 0 {
		t.index.fixIgnored = false
	}
	if t.first.canStage(force, before) {
		first, err := t.first.stage(ctx)
		switch {
		case err == nil:
			return t.endFirst(ctx, st, first, found, began)
		case !errors.Is(err, errNotFirst):
			return st, err
		}
		t.log.Info("snapshot store: the first snapshot is staged by git add instead", "why", err)
	}
	unreadable, err := t.addAll(ctx, st.took.Files-int64(before) <= maxStreamedFiles)
	if err != nil {
		return st, err
	}
	// git add refuses a file inside a directory it takes for .git as a
	// file it could not add: the directory is named already.
	unreadable = slices.DeleteFunc(unreadable, func(u repo.Skipped) bool {
		return slices.ContainsFunc(found.odd, func(k repo.Skipped) bool {
			return k.Reason == repo.ReasonGitName && strings.HasPrefix(u.Path, k.Path+"/")
		})
	})
	t.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: unreadable}
	for _, u := range unreadable {
		if !slices.ContainsFunc(st.skipped, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			st.skipped = append(st.skipped, u)
		}
	}
	if err := t.forceAdd(ctx, force); err != nil {
		return st, err
	}
	st.took.Add = time.Since(began)

	began = time.Now()
	t.setStep(StepTree)
	for attempt := 0; ; attempt++ {
		if st.tree, err = t.git.Text(ctx, "write-tree"); err != nil {
			return st, fmt.Errorf("snapshot of %s: %w", t.work, err)
		}
		parent := repo.EmptyTree
		if t.newest.N > 0 {
			parent = t.newest.Tree
		}
		st.counts = diffCounts{}
		switch {
		case st.tree == parent:
		case parent == repo.EmptyTree && before == 0:
			st.counts.added = t.index.entries()
		default:
			if st.counts, err = t.diffCount(ctx, parent, st.tree); err != nil {
				return st, err
			}
		}
		if attempt > 0 || !t.index.needsFix(st.counts.ignoreFile) {
			break
		}
		// An ignore rule changed: tracked files it now covers leave the
		// index (git add -A keeps tracked files even when ignored).
		fixed, err := t.index.dropIgnored(ctx, force)
		if err != nil {
			return st, err
		}
		if !fixed {
			break
		}
	}
	if st.modes, err = t.modeLines(ctx, st.tree, found.modes); err != nil {
		return st, err
	}
	st.took.Tree = time.Since(began)
	return st, nil
}

// endFirst is stage's end for a first snapshot written in process
// (stageFirst), begun at start.
func (t *Taker) endFirst(ctx context.Context, st staged, first stagedFirst, found walked, start time.Time) (staged, error) {
	t.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: first.unreadable}
	st.skipped = append(st.skipped, first.unreadable...)
	st.took.Add = time.Since(start)
	began := time.Now()
	st.tree = first.tree
	st.counts = diffCounts{added: first.files}
	var err error
	if st.modes, err = t.modeLines(ctx, st.tree, found.modes); err != nil {
		return st, err
	}
	st.took.Tree = time.Since(began)
	return st, nil
}

// stageFromChanged is stage's part for a Take from what changed, with the
// walk of the changed paths done: the size exclusions brought up to date,
// the files staged in process (stageChanged), the permissions listed.
// errNotFast sends the Take to the full add.
func (t *Taker) stageFromChanged(ctx context.Context, roots []string, found walked) (staged, error) {
	if err := t.sizes.exclude(ctx, found.over, true); err != nil {
		return staged{}, err
	}
	odd, err := t.notIgnored(ctx, found.odd, t.pipes.IgnoredList)
	if err != nil {
		return staged{}, err
	}
	st, err := t.fast.stage(ctx, roots, found)
	if err != nil {
		return staged{}, err
	}
	began := time.Now()
	set := make(map[string]bool, len(roots))
	for _, r := range roots {
		set[r] = true
	}
	unreadable := slices.Clone(st.skipped)
	for _, u := range t.walkState.unreadable {
		if !inRoots(u.Path, set) && !slices.ContainsFunc(unreadable, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			unreadable = append(unreadable, u)
		}
	}
	t.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: unreadable}
	st.skipped = append(t.sizes.skipped(), odd...)
	for _, u := range unreadable {
		if !slices.ContainsFunc(st.skipped, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			st.skipped = append(st.skipped, u)
		}
	}
	if st.modes, err = t.fast.modeLines(ctx, st.tree, found.modes); err != nil {
		return staged{}, err
	}
	st.took.Tree += time.Since(began)
	return st, nil
}

// Commit makes the staged tree a snapshot unless it equals the newest,
// and tells the owner (Made). The caller holds the writer lock.
func (t *Taker) Commit(ctx context.Context, st *Staged, trigger string, seq uint64) (repo.Snapshot, bool, error) {
	if t.newest.N > 0 && st.tree == t.newest.Tree && st.modes == t.newestModes {
		return t.newest, false, nil
	}
	began := time.Now()
	snap := repo.Snapshot{
		Time:    t.now().UTC(),
		Trigger: trigger,
		Seq:     seq,
		Parent:  t.newest.ID,
		Skipped: len(st.skipped),
		Tree:    st.tree,

		Conversation: t.conversationNow(),
		N:            t.newest.N + 1,
		Note:         st.note,
	}
	snap.Added, snap.Modified, snap.Deleted = st.counts.added, st.counts.modified, st.counts.deleted
	// No git parent: every snapshot is a root commit, its parent is in the
	// metadata, so retention drops old snapshots by deleting their refs,
	// without rewriting (and renaming) the ones it keeps. The commit is
	// the one `git commit-tree` would write (TestCommitObjectIsGits).
	message := repo.Message(snap, st.skipped, st.modes)
	id, err := t.objs.write("commit", repo.CommitObject(st.tree, snap.Time.Unix(), message))
	if err == nil {
		err = t.objs.finish()
	}
	if err != nil {
		return repo.Snapshot{}, false, fmt.Errorf("snapshot of %s: %w", t.work, err)
	}
	snap.ID = id.String()
	t.reach(PointCommit)
	// The ref is made last, atomically (a lock file renamed into place),
	// and never over one that exists.
	before, stamped := t.repo.Stamp()
	err = t.repo.CreateRef(repo.RefName(snap.N), id, func() { t.reach(PointRefLocked) })
	if err != nil {
		t.repo.ForgetList()
		return repo.Snapshot{}, false, fmt.Errorf("snapshot of %s: %w", t.work, err)
	}
	t.repo.ListTaken(snap.ID, st.tree, message, before, stamped)
	from := t.newest.Tree
	t.newest, t.newestModes = snap, st.modes
	viewstamp.Changed() // resume shows the newest snapshot
	t.made(Made{Snapshot: snap, Skipped: st.skipped, Files: st.files, From: from, Changes: st.changes, Added: st.added})
	st.took.Commit = time.Since(began)
	return snap, true, nil
}
