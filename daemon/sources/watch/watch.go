// Package watch watches an agent's work directory with fsnotify and turns
// the activity into debounced summaries (which paths changed, how many),
// so the daemon can notice the work moving and checkpoint on its own.
//
// inotify is not recursive: the Watcher adds one watch per directory, walks
// the tree at start, and on every new directory adds its watch and then
// scans it, reporting the files it finds (they may have been created before
// the watch existed). It skips what is not work: .git internals, directories
// named in Options.IgnoreDirs (node_modules and friends by default), paths
// matched by the .gitignore files of the tree (reloaded when they change)
// and by Options.Ignore, and the temporary files editors and agents write
// before renaming them over the real file (only the target is reported).
//
// An inotify queue overflow triggers a full rescan (Summary.Rescanned);
// running out of inotify watches logs one line naming
// fs.inotify.max_user_watches, marks the Watcher degraded (Degraded) and
// keeps watching what it could.
//
// Commits and branch switches are not reported as paths: the Watcher watches
// each repository's .git directory and its refs/ tree (nothing else under
// .git) and calls Options.OnGitEvent, debounced, so package gitwatch can
// read what moved. Nothing polls: timers exist only while a debounce is
// pending.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Defaults for Options.
const (
	DefaultQuiet    = 2 * time.Second
	DefaultMaxWait  = 30 * time.Second
	DefaultMaxPaths = 50
	// DefaultSettle is how long a file must go without a write before
	// OnSettled reports it: long enough that an editor's or an agent's
	// write-then-rename lands as one version, short enough that a change
	// undone a second later was still seen settled.
	DefaultSettle = 300 * time.Millisecond

	// gitQuiet debounces OnGitEvent: a commit writes a lock file, renames
	// it and appends logs within a few milliseconds.
	gitQuiet   = 200 * time.Millisecond
	gitMaxWait = time.Second

	// maxTracked bounds the distinct paths remembered per summary; past it
	// further paths are still counted (possibly twice) and the most recent
	// are still listed.
	maxTracked = 200_000

	// Batching. Each inotify event wakes the process (fsnotify's file is in
	// the Go netpoller), and a wake-up — context switches, fsnotify's read
	// and hand-over — costs more than handling the event. So when a wake-up
	// finds fewer than eventBuffer events (a trickle), Run stops reading for
	// coalesce: fsnotify's reader blocks once the small channel buffer is
	// full, events gather in the kernel queue (fs.inotify.max_queued_events,
	// 16384 by default), and the next wake-up takes them all. A wake-up that
	// finds more is a burst and is read on without pause: the queue can only
	// overflow if ~16k events arrive within one pause (and then a rescan
	// catches up). The pause adds at most coalesce to the report latency.
	// At its end, what gathered is read at once and what comes after is
	// waited for without another pause: the end of a burst then costs one
	// wake-up, not a second one a pause later that finds nothing.
	eventBuffer = 16
	coalesce    = 50 * time.Millisecond
	maxDrain    = 1 << 14 // events per wake-up before ctx and timers get a look

	// rescanSlack is subtracted from the last quiet moment when a rescan
	// decides which files changed (file systems with coarse timestamps).
	rescanSlack = 2 * time.Second
)

// Options configures a Watcher.
type Options struct {
	// Root is the work directory. Symbolic links in it are resolved.
	Root string
	// Ignore are extra patterns in gitignore syntax, relative to Root.
	// They are applied before the tree's .gitignore files and win over
	// them, so "!keep.log" here re-includes what a .gitignore excludes.
	Ignore []string
	// IgnoreDirs are directory names skipped at any depth (not watched,
	// not reported): [watch] ignore_dirs, whose default the configuration
	// fills in. nil skips none.
	IgnoreDirs []string
	// Quiet: a Summary is emitted once this long passes without a new
	// change (default 2s).
	Quiet time.Duration
	// MaxWait: ...or at the latest this long after a burst's first change
	// (default 30s), so constant activity still reports.
	MaxWait time.Duration
	// MaxPaths is how many paths a Summary lists (default 50); Count covers
	// them all.
	MaxPaths int
	Logger   *slog.Logger
	// OnGitEvent is called, debounced (~200ms), with the absolute root of a
	// worktree when its HEAD, packed-refs or a file under refs/ changed (and
	// for every known repository after a rescan). The worktree may be an
	// ancestor of Root when Root lies inside a repository. It runs on a
	// goroutine of its own (never concurrently with itself); a slow call
	// delays later calls, not the watching. Optional.
	OnGitEvent func(dir string)
	// Settle is how long a path must go without a change before
	// OnSettled reports it (default DefaultSettle).
	Settle time.Duration
	// OnSettled, when set, is called on Run's goroutine with the paths
	// (as Summary.Paths names them) that have had no change for Settle,
	// each with the time of its last change: the version journal's
	// trigger, independent of Quiet. It must return quickly.
	OnSettled func([]Settled)
	// Opener opens the files whose content the Watcher reads (each
	// .gitignore, .git/info/exclude, a .git file and the commondir it
	// leads to) with the rights of the tree's owner; nil: this process
	// opens them (safefile.Here). A daemon running as root over another
	// user's tree passes that owner's, so a file the owner cannot read is
	// never read for them. Shared shares a Watcher only among subscribers
	// passing an equal Opener.
	//
	// Listing directories and placing inotify watches stay in this
	// process: inotify reads no content, and the names it reports only
	// tell the owner's own snapshot store, which opens them with the
	// owner's rights, where to look. The Opener is asked only when an
	// ignore or git file is read, never per event.
	Opener safefile.Opener
}

// Summary is the activity of one burst.
type Summary struct {
	// Paths are the most recently changed paths, most recent first,
	// relative to Root with forward slashes; a directory that was removed or
	// renamed away ends in "/". At most Options.MaxPaths.
	Paths []string
	// Count is the number of distinct paths changed in the burst.
	Count int
	// First and Last are when the burst's first and last change was seen.
	First, Last time.Time
	// Rescanned is set when events were lost (inotify queue overflow) and
	// the tree was rescanned: Paths then also holds the files modified since
	// the last quiet summary (or the start), and removals or moves of
	// old files made meanwhile are missing.
	Rescanned bool
	// Changed lists, sorted, every path of the tree that changed in the
	// burst as Paths names them, and also the changed files the Watcher
	// does not report as activity (those its ignore rules cover, editor
	// temporary files) and the directories whose .git came or went: what
	// a snapshot of the tree from what changed must look at again. Set
	// only when Complete.
	Changed []string
	// Complete says the Watcher vouches for Changed: nothing in the tree
	// changed since the previous summary but at those paths. It is false
	// after lost events (a rescan, an fsnotify error), once a directory
	// could not be watched (the watch limit) and while rules the tree's
	// own .gitignore files and Options.Ignore do not hold (the .gitignore
	// files above Root, a .git/info/exclude) may hide a directory; and
	// when the burst changed more paths than the Watcher remembers.
	Complete bool
}

// Settled is a path that has had no change for Options.Settle.
type Settled struct {
	Path string
	Last time.Time
}

// Stats are counters for status and metrics.
type Stats struct {
	WatchedDirs int    // directories with an inotify watch (work tree and git metadata)
	Events      uint64 // fsnotify events received
	Changes     uint64 // changes recorded (before de-duplication)
	Ignored     uint64 // events and directories dropped by the ignore rules, temp files, .git internals
	Rescans     uint64 // full rescans after an overflow
	Summaries   uint64 // summaries emitted
	WatchErrors uint64 // directories that could not be watched
}

type dirKind uint8

const (
	kindWork    dirKind = iota // a directory of the work tree
	kindGit                    // a git directory: .git, a linked worktree's gitdir, a common dir
	kindGitRefs                // refs/ of a git directory and below
)

// dirInfo is the state of one watched directory.
type dirInfo struct {
	name     string // base name
	path     string // absolute
	rel      string // kindWork: relative to Root ("" for Root)
	kind     dirKind
	parent   *dirInfo // nil for Root and for git directories outside the tree
	children map[string]*dirInfo
	skipped  map[string]bool // names of child directories not watched: ignored
	rules    *ruleSet        // kindWork: its .gitignore
	git      *dirInfo        // kindGitRefs: the git directory above; kindGit: itself
	repos    []string        // kindGit: worktree roots told through OnGitEvent
	external []string        // kindWork with a .git file: git dirs watched for it
}

func (d *dirInfo) child(name string, c *dirInfo) {
	if d.children == nil {
		d.children = map[string]*dirInfo{}
	}
	d.children[name] = c
}

// outerRules are the .gitignore files above Root, inside the repository
// that encloses it; prefix is Root relative to their directory plus "/".
type outerRules struct {
	prefix string
	rules  *ruleSet
}

// Watcher watches one work directory. Create with New; run with Run.
type Watcher struct {
	o          Options
	root       string
	rootPrefix int // len(root)+1: where a path below root starts its relative part
	log        *slog.Logger
	ignoreDirs map[string]bool
	extra      *ruleSet

	// Test seams: addHook runs before every fsnotify Add and can fail it;
	// injectErr is read like fsnotify's Errors channel.
	addHook   func(path string) error
	injectErr chan error

	ready    chan struct{}
	started  atomic.Bool
	degraded atomic.Pointer[string]
	st       struct {
		dirs                                                    atomic.Int64
		events, changes, ignored, rescans, summaries, watchErrs atomic.Uint64
	}

	// Run's goroutine only.
	fw          *fsnotify.Watcher
	dirs        map[string]*dirInfo
	rootDir     *dirInfo
	outer       []outerRules
	limitLogged bool
	// unwatched counts the directories that could not be watched for
	// another reason than the watch limit; firstUnwatched says which was
	// first and why (unwatchedDir).
	unwatched      int
	firstUnwatched string
	// unreadLogged are the ignore files logged as unreadable (unreadRules).
	unreadLogged map[string]bool
	// blind is set once the Watcher cannot vouch for the tree any more
	// (a directory it could not watch) and foreignRules while rules git
	// reading only the tree would not apply may hide a directory:
	// summaries are not Complete then.
	blind        bool
	foreignRules bool
	dropped      [16]string // recently dropped directories (a move reports them twice)
	droppedI     int
	b            batch
	quietSince   time.Time // the last moment the queue was known drained (start, a quiet summary)
	rescanSince  time.Time // modeRescan: files modified since are reported
	scanNow      time.Time // when the running scan started

	creates   []pendingCreate // Create events of the batch, not settled yet
	createIdx map[string]int  // path → index in creates

	// settling are the paths changed that have not settled yet: path →
	// when last changed (OnSettled).
	settling map[string]time.Time

	gitPending    map[string]bool
	resyncPending map[*dirInfo]bool
	maintFirst    time.Time
	maintLast     time.Time
	gitq          *gitQueue
}

type batch struct {
	seen      map[string]int64 // path → recency (unix ns)
	extra     int              // paths past maxTracked
	extraTail []entry          // the most recent of those
	first     time.Time
	last      time.Time
	rescanned bool
	// hidden are the changed paths not reported as activity (ignored
	// files, editor temporary files, directories whose .git came or
	// went): for Summary.Changed only.
	hidden map[string]bool
	lost   bool // an fsnotify error: events may be missing
}

type entry struct {
	path string
	t    int64
}

// New checks the options; Run starts watching.
func New(o Options) (*Watcher, error) {
	if o.Root == "" {
		return nil, errors.New("watch: Options.Root is empty")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("watch: %s is not a directory", root)
	}
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxWait < o.Quiet {
		o.MaxWait = o.Quiet
	}
	if o.MaxPaths <= 0 {
		o.MaxPaths = DefaultMaxPaths
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Opener == nil {
		o.Opener = safefile.Here
	}
	w := &Watcher{
		o:          o,
		root:       root,
		rootPrefix: len(root) + 1,
		log:        o.Logger,
		ignoreDirs: map[string]bool{},
		ready:      make(chan struct{}),
		injectErr:  make(chan error),
	}
	if root == "/" {
		w.rootPrefix = 1
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range o.IgnoreDirs {
		w.ignoreDirs[d] = true
	}
	if len(o.Ignore) > 0 {
		if rs := parseRules([]byte(strings.Join(o.Ignore, "\n"))); len(rs.pats) > 0 {
			w.extra = rs
		}
	}
	return w, nil
}

// Root is the watched directory (absolute, symbolic links resolved).
func (w *Watcher) Root() string { return w.root }

// Ready is closed once Run has placed the initial watches.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Degraded is "" while everything is watched, or why not.
func (w *Watcher) Degraded() string {
	if p := w.degraded.Load(); p != nil {
		return *p
	}
	return ""
}

func (w *Watcher) setDegraded(why string) {
	w.degraded.Store(&why)
	viewstamp.Changed() // resume names the watch degraded
}

// Stats returns the counters; safe from any goroutine.
func (w *Watcher) Stats() Stats {
	return Stats{
		WatchedDirs: int(w.st.dirs.Load()),
		Events:      w.st.events.Load(),
		Changes:     w.st.changes.Load(),
		Ignored:     w.st.ignored.Load(),
		Rescans:     w.st.rescans.Load(),
		Summaries:   w.st.summaries.Load(),
		WatchErrors: w.st.watchErrs.Load(),
	}
}

// Run watches until ctx ends, calling out with each Summary (on Run's
// goroutine: out should return quickly). Activity pending when ctx ends is
// flushed to out first. Run owns the fsnotify watcher and its goroutines
// and has stopped them all when it returns. It can be called once.
func (w *Watcher) Run(ctx context.Context, out func(Summary)) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("watch: Run called twice")
	}
	fw, err := fsnotify.NewBufferedWatcher(eventBuffer)
	if err != nil {
		if errors.Is(err, syscall.EMFILE) {
			return fmt.Errorf("watch: %w (inotify instance limit: raise fs.inotify.max_user_instances, e.g. sudo sysctl -w fs.inotify.max_user_instances=512)", err)
		}
		return fmt.Errorf("watch: %w", err)
	}
	w.fw = fw
	w.dirs = map[string]*dirInfo{}
	w.gitPending = map[string]bool{}
	w.resyncPending = map[*dirInfo]bool{}
	w.createIdx = map[string]int{}
	w.quietSince = time.Now()

	var wg sync.WaitGroup
	// The git queue stops with Run, also when Run returns on its own (an
	// fsnotify failure), not only when ctx ends.
	gitCtx, stopGit := context.WithCancel(ctx)
	if w.o.OnGitEvent != nil {
		w.gitq = &gitQueue{wake: make(chan struct{}, 1), pending: map[string]bool{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.gitq.run(gitCtx, w.o.OnGitEvent)
		}()
	}
	defer func() {
		_ = fw.Close()
		stopGit()
		wg.Wait()
	}()

	w.start()
	close(w.ready)
	return w.loop(ctx, out)
}

// errEventsClosed ends Run when fsnotify closed its event channel.
var errEventsClosed = errors.New("watch: fsnotify closed its event channel")

// loop is Run's event loop: events in batches, errors, and the debounced
// summaries and maintenance, until ctx ends.
func (w *Watcher) loop(ctx context.Context, out func(Summary)) error {
	t := newLoopTimers()
	defer t.stop()
	evC := w.fw.Events
	for {
		select {
		case <-ctx.Done():
			if !w.b.first.IsZero() {
				w.emit(out)
			}
			return nil
		case ev, ok := <-evC:
			if !ok {
				return errEventsClosed
			}
			n, err := w.handleBatch(ev)
			if err != nil {
				return err
			}
			t.summaryAt(w)
			if n < eventBuffer { // a trickle: let the next ones gather (see coalesce)
				evC = nil
				t.pause.Reset(coalesce)
				t.pauseC = t.pause.C
			}
		case <-t.pauseC:
			t.pauseC = nil
			evC = w.fw.Events
			select {
			case ev, ok := <-evC:
				if !ok {
					return errEventsClosed
				}
				if _, err := w.handleBatch(ev); err != nil {
					return err
				}
				t.summaryAt(w)
			default:
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return errors.New("watch: fsnotify closed its error channel")
			}
			w.handleError(err)
		case err := <-w.injectErr:
			w.handleError(err)
		case <-t.sumC:
			t.sumC = nil
			w.summaryDue(t, out)
		case <-t.maintC:
			t.maintC = nil
			w.maintenanceDue(t)
		case <-t.settleC:
			t.settleC = nil
			w.settleDue(t)
		}
		t.arm(w)
	}
}

// handleBatch handles ev and the events ready after it (up to maxDrain),
// yielding once when the channel is empty so that fsnotify's reader can
// refill it, then settles the batch's Create events. It returns how many
// events it handled.
func (w *Watcher) handleBatch(ev fsnotify.Event) (int, error) {
	w.handle(ev)
	n := 1
	for yielded := false; n < maxDrain; {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return n, errEventsClosed
			}
			w.handle(ev)
			n++
			yielded = false
			continue
		default:
		}
		if yielded {
			break
		}
		runtime.Gosched()
		yielded = true
	}
	w.flushCreates()
	return n, nil
}

// summaryDue emits the pending summary once the burst has been quiet for
// Quiet or has lasted MaxWait, or sets the timer for whichever comes first.
func (w *Watcher) summaryDue(t *loopTimers, out func(Summary)) {
	now := time.Now()
	quietAt := w.b.last.Add(w.o.Quiet)
	maxAt := w.b.first.Add(w.o.MaxWait)
	if !now.Before(quietAt) {
		w.quietSince = now
		w.emit(out)
	} else if !now.Before(maxAt) {
		w.emit(out)
	} else {
		t.sum.Reset(min(quietAt.Sub(now), maxAt.Sub(now)))
		t.sumC = t.sum.C
	}
}

// maintenanceDue runs the maintenance once it has been quiet for gitQuiet
// or waited gitMaxWait, or sets the timer for whichever comes first.
func (w *Watcher) maintenanceDue(t *loopTimers) {
	now := time.Now()
	quietAt := w.maintLast.Add(gitQuiet)
	maxAt := w.maintFirst.Add(gitMaxWait)
	if !now.Before(quietAt) || !now.Before(maxAt) {
		w.maintenance()
	} else {
		t.maint.Reset(min(quietAt.Sub(now), maxAt.Sub(now)))
		t.maintC = t.maint.C
	}
}

// record notes a change of rel (relative to Root) with recency t, seen at now.
func (w *Watcher) record(rel string, t int64, now time.Time) {
	w.st.changes.Add(1)
	b := &w.b
	if b.seen == nil {
		b.seen = make(map[string]int64, 64)
	}
	if old, ok := b.seen[rel]; ok {
		if t > old {
			b.seen[rel] = t
		}
	} else if len(b.seen) < maxTracked {
		b.seen[rel] = t
	} else {
		b.extra++
		b.extraTail = append(b.extraTail, entry{rel, t})
		if n := len(b.extraTail); n > 2*w.o.MaxPaths {
			b.extraTail = append(b.extraTail[:0], b.extraTail[n-w.o.MaxPaths:]...)
		}
	}
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	if w.o.OnSettled != nil && !strings.HasSuffix(rel, "/") {
		if w.settling == nil {
			w.settling = map[string]time.Time{}
		}
		if _, ok := w.settling[rel]; ok || len(w.settling) < maxTracked {
			w.settling[rel] = now
		}
	}
}

// emit hands the pending batch to out and starts a new one.
func (w *Watcher) emit(out func(Summary)) {
	b := w.b
	w.b = batch{}
	if len(b.seen) == 0 && b.extra == 0 {
		// Only hidden changes: they wait for the next summary.
		w.b.hidden, w.b.lost = b.hidden, b.lost
		return
	}
	k := w.o.MaxPaths
	top := make([]entry, 0, k) // ascending by (t, path desc); top[0] is the weakest
	less := func(a, c entry) bool { return a.t < c.t || a.t == c.t && a.path > c.path }
	consider := func(e entry) {
		if len(top) == k {
			if !less(top[0], e) {
				return
			}
			top = append(top[:0], top[1:]...)
		}
		i := 0
		for i < len(top) && less(top[i], e) {
			i++
		}
		top = append(top, entry{})
		copy(top[i+1:], top[i:])
		top[i] = e
	}
	for p, t := range b.seen {
		consider(entry{p, t})
	}
	for _, e := range b.extraTail {
		if _, dup := b.seen[e.path]; !dup {
			consider(e)
		}
	}
	s := Summary{
		Paths:     make([]string, len(top)),
		Count:     len(b.seen) + b.extra,
		First:     b.first,
		Last:      b.last,
		Rescanned: b.rescanned,
	}
	for i := range top {
		s.Paths[i] = top[len(top)-1-i].path
	}
	s.Changed, s.Complete = w.changed(b)
	w.st.summaries.Add(1)
	if out != nil {
		out(s)
	}
}

// changed lists every path of batch b, hidden ones too, sorted, when the
// Watcher can vouch for them (Summary.Complete).
func (w *Watcher) changed(b batch) ([]string, bool) {
	if b.rescanned || b.lost || b.extra > 0 || w.blind || w.foreignRules || len(w.outer) > 0 {
		return nil, false
	}
	list := make([]string, 0, len(b.seen)+len(b.hidden))
	for p := range b.seen {
		list = append(list, p)
	}
	for p := range b.hidden {
		if _, dup := b.seen[p]; !dup {
			list = append(list, p)
		}
	}
	slices.Sort(list)
	return list, true
}

// hide notes a change of rel that is not reported as activity (see
// batch.hidden); past maxTracked the batch cannot vouch any more.
func (w *Watcher) hide(rel string) {
	b := &w.b
	if b.hidden == nil {
		b.hidden = map[string]bool{}
	}
	if len(b.hidden) >= maxTracked {
		b.lost = true
		return
	}
	b.hidden[rel] = true
}

// handleError deals with what fsnotify reports on its Errors channel.
func (w *Watcher) handleError(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.log.Warn("watch: inotify event queue overflowed, events were lost; rescanning the tree (raise fs.inotify.max_queued_events if this repeats)",
			"root", w.root)
		w.rescan()
		return
	}
	w.log.Warn("watch: fsnotify error", "root", w.root, "err", err)
	w.b.lost = true
}

// maintenance runs the debounced work: OnGitEvent calls and the resyncs of
// subtrees whose .gitignore changed.
func (w *Watcher) maintenance() {
	w.maintFirst, w.maintLast = time.Time{}, time.Time{}
	for d := range w.resyncPending {
		if w.dirs[d.path] == d {
			w.scan(d, modeResync)
		}
	}
	clear(w.resyncPending)
	if len(w.gitPending) > 0 {
		if w.gitq != nil {
			w.gitq.add(w.gitPending)
		}
		clear(w.gitPending)
	}
}

func (w *Watcher) touchMaint() {
	now := time.Now()
	if w.maintFirst.IsZero() {
		w.maintFirst = now
	}
	w.maintLast = now
}

// gitTouched schedules OnGitEvent for the repositories of git dir g.
func (w *Watcher) gitTouched(g *dirInfo) {
	if g == nil || w.o.OnGitEvent == nil {
		return
	}
	for _, r := range g.repos {
		w.gitPending[r] = true
	}
	w.touchMaint()
}

// gitQueue hands repositories to OnGitEvent on a goroutine of its own,
// coalescing what piles up while a call runs.
type gitQueue struct {
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

func (q *gitQueue) add(dirs map[string]bool) {
	q.mu.Lock()
	for d := range dirs {
		q.pending[d] = true
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *gitQueue) run(ctx context.Context, fn func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		q.mu.Lock()
		dirs := make([]string, 0, len(q.pending))
		for d := range q.pending {
			dirs = append(dirs, d)
		}
		clear(q.pending)
		q.mu.Unlock()
		for _, d := range dirs {
			if ctx.Err() != nil {
				return
			}
			fn(d)
		}
	}
}
