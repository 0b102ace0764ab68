package capture

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// transcriptFollower tails the agent's active transcript (Claude Code or
// Codex) to know how full its context is and when it compacts. Only
// numbers and markers become signals; the text is read and forgotten. The
// offset is kept on disk, so a restart goes on where it stopped.
type transcriptFollower struct {
	c       *Capture
	switch_ chan string // a transcript named by a hook, to follow instead
	// letGo says the transcript followed became another agent's (its hook
	// named it; TranscriptClaims).
	letGo chan struct{}

	mu   sync.Mutex
	path string // followed now; "" when none
	// waiting is where a session is awaited while none is followed (set
	// once the first scan is done); failed is why nothing can be followed.
	waiting, failed string
	// point is where the conversation of pointPath stands (notePoint).
	point     snapshot.Conversation
	pointPath string
}

// offsetsFile keeps, per agent, where each transcript was read up to.
const offsetsFile = "transcripts.json"

type savedOffset struct {
	Offset int64  `json:"offset"`
	Inode  uint64 `json:"inode"`
}

func newTranscriptFollower(c *Capture) *transcriptFollower {
	return &transcriptFollower{c: c, switch_: make(chan string, 1), letGo: make(chan struct{}, 1)}
}

// homes are the homes of the transcripts the agent follows: its kind's
// (TranscriptOptions.Kind), both without one.
func (f *transcriptFollower) homes() (claude, codex string) {
	t := f.c.o.Transcripts
	switch t.Kind {
	case KindClaudeCode:
		return t.ClaudeHome, ""
	case KindCodex:
		return "", t.CodexHome
	}
	return t.ClaudeHome, t.CodexHome
}

// allowed reports whether path is a transcript the agent may follow: in
// the home of its kind. A hook payload names the transcript, and the
// daemon reads only there.
func (f *transcriptFollower) allowed(path string) bool {
	claude, codex := f.homes()
	return inHome(path, claude, codex)
}

// inHome reports whether path is a .jsonl file under one of homes ("" : none).
func inHome(path string, homes ...string) bool {
	path = filepath.Clean(path)
	for _, home := range homes {
		if home != "" && strings.HasPrefix(path, filepath.Clean(home)+string(filepath.Separator)) {
			return strings.HasSuffix(path, ".jsonl")
		}
	}
	return false
}

// bind makes path, named by the agent's hook, the agent's transcript: no
// other agent on the workdir follows it from now on, whether this agent
// follows transcripts itself or not. Only a path in a configured home is
// bound (where a transcript may be); one another agent's hook named first
// is not (it reports false, and the refusal is logged).
func (f *transcriptFollower) bind(path string) bool {
	t := f.c.o.Transcripts
	if f.c.o.TranscriptClaims == nil || !inHome(path, t.ClaudeHome, t.CodexHome) {
		return true
	}
	if holder := f.c.o.TranscriptClaims.Bind(f.c.o.Agent, path); holder != "" {
		f.c.log.Warn("a transcript named by a hook was refused: another agent's hook named it first; it stays that agent's",
			"transcript", path, "holder", holder)
		return false
	}
	return true
}

// follow asks to follow path (from a hook's transcript_path).
func (f *transcriptFollower) follow(path string) {
	f.mu.Lock()
	same := f.path == path
	f.mu.Unlock()
	if same || !f.allowed(path) {
		return
	}
	select {
	case f.switch_ <- path:
	default:
	}
}

// run follows transcripts until ctx ends: the workdir's newest one, then
// whichever a hook names or a new session starts (transcript.Finder). It
// wakes on file events: in the folder of the transcript followed, in the
// folders where a new session appears and in their parents up to the
// agent's home (so a project folder created after the start is seen as it
// appears). transcripts.rescan is a safety net for what a watch cannot
// say (a watch limit reached, a home created after the start), armed only
// while the last rescan left a folder of the way unwatched: a daemon of
// fifty places, each rescanning every 30 s for folders a watched parent
// would announce anyway, never slept.
func (f *transcriptFollower) run(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.c.log.Warn("cannot follow transcripts", "err", err)
		f.mu.Lock()
		f.failed = "cannot watch: " + err.Error()
		f.mu.Unlock()
		return
	}
	defer w.Close()
	t := f.c.o.Transcripts
	claude, codex := f.homes()
	r := &transcriptReader{f: f, w: w, lastFrac: -1, finder: transcript.NewFinder(claude, codex, f.c.o.Workdir)}
	// One transcript, one agent: what another agent on the workdir
	// follows is never picked, and is let go once a hook binds it.
	claims, agent := f.c.o.TranscriptClaims, f.c.o.Agent
	r.finder.SetTaken(func(p string) bool { return claims.TakenFrom(agent, p) })
	r.finder.SetOpener(f.c.o.Opener)
	claims.listen(agent, func() {
		select {
		case f.letGo <- struct{}{}:
		default:
		}
	})
	defer claims.listen(agent, nil)
	defer claims.Release(agent) // also Capture's at its end; this one comes after the last pick
	r.rescan(ctx)
	var rescan <-chan time.Time // nil: the watches alone
	safety := time.NewTimer(t.Rescan)
	defer safety.Stop()
	safety.Stop()
	for {
		switch {
		case r.unwatched && rescan == nil && t.Rescan > 0:
			safety.Reset(t.Rescan)
			rescan = safety.C
		case !r.unwatched && rescan != nil:
			safety.Stop()
			rescan = nil
		}
		select {
		case <-ctx.Done():
			return
		case p := <-f.switch_:
			r.finder.Follow(p)
			if !r.start(p) {
				r.rescan(ctx) // another agent's since: pick another
				continue
			}
			r.read(ctx)
		case <-f.letGo:
			r.rescan(ctx)
		case <-rescan:
			rescan = nil
			r.rescan(ctx)
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			r.event(ctx, ev)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			f.c.log.Debug("transcript watch", "err", err)
			r.read(ctx) // an overflow may have hidden writes
		}
	}
}

// transcriptReader is run's state: the transcript followed, how far it was
// read and what it said last.
type transcriptReader struct {
	f       *transcriptFollower
	w       *fsnotify.Watcher
	tail    *transcript.Tail // nil when no transcript is followed
	tracker *transcript.Tracker
	dir     string // the directory watched
	// historyEnd is the size of a transcript seen for the first time
	// when following began: what lies before it is history, not news.
	historyEnd int64
	lastFrac   float64 // the context fraction signalled last; -1 before any
	finder     *transcript.Finder
	watching   map[string]bool // the folders watched for new sessions, and their parents
	// sessionDirs are the folders where a new session's file appears,
	// chainDirs their parents up to the agent's home (from the last rescan).
	sessionDirs, chainDirs map[string]bool
	scanned                bool // the first Scan is done
	// unwatched is set when the last rescan left a folder of a chain
	// unwatched that no watched parent announces: one that exists but
	// could not be watched (the watch limit, permissions), or missing
	// under a parent that is not watched. Only then does run rescan on a
	// timer.
	unwatched bool
}

// event acts on one file event: reads what the followed transcript
// gained, and scans again when a new session may have begun.
func (r *transcriptReader) event(ctx context.Context, ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 && r.watching[name] {
		delete(r.watching, name) // the kernel dropped its watch; rescan adds it again
	}
	parent := filepath.Dir(name)
	switch {
	case r.tail != nil && name == filepath.Clean(r.tail.Path) && ev.Op&(fsnotify.Write|fsnotify.Create) != 0:
		r.read(ctx)
	case r.sessionDirs[parent] && strings.HasSuffix(name, ".jsonl") &&
		(ev.Op&fsnotify.Create != 0 || ev.Op&fsnotify.Write != 0 && !r.finder.Settled(name)):
		r.rescan(ctx) // a new session, perhaps (a rollout says whose once its first line is whole)
	case r.chainDirs[parent] && ev.Op&fsnotify.Create != 0 && isDir(name):
		r.rescan(ctx) // a folder on the way to where sessions appear
	}
}

// exists reports whether path exists now (not following a link).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// isDir reports whether path is a directory now (not following a link).
func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// rescan follows the transcript the Finder picks when it changed, and
// keeps a watch on the folders where a new session would appear and on
// their parents.
func (r *transcriptReader) rescan(ctx context.Context) {
	if r.watching == nil {
		r.watching = map[string]bool{}
	}
	r.sessionDirs, r.chainDirs = map[string]bool{}, map[string]bool{}
	r.unwatched = false
	for _, chain := range r.finder.WatchChains(time.Now()) {
		if top := chain[len(chain)-1]; !exists(top) {
			// No ~/.codex yet (no session of it ever): the folder
			// above announces it.
			chain = append(slices.Clip(chain), filepath.Dir(top))
		}
		r.sessionDirs[chain[0]] = true
		for _, d := range chain[1:] {
			r.chainDirs[d] = true
		}
		// Parents first, so that a folder created between two Adds is
		// either watched or seen by the Scan below. A missing folder
		// whose parent is watched is announced by that parent's
		// create event (event: a chain folder created), and so is
		// everything below it.
		announced := false
		for i := len(chain) - 1; i >= 0 && !announced; i-- {
			d := chain[i]
			if r.watching[d] {
				continue
			}
			err := r.w.Add(d)
			switch {
			case err == nil:
				r.watching[d] = true
			case errors.Is(err, fs.ErrNotExist) && i+1 < len(chain) && r.watching[chain[i+1]]:
				announced = true
			default:
				r.unwatched = true
			}
		}
	}
	first := !r.scanned
	r.scanned = true
	defer func() {
		r.f.mu.Lock()
		r.f.waiting = strings.Join(r.finder.WatchDirs(time.Now()), ", ")
		r.f.mu.Unlock()
	}()
	// A pick another agent took meanwhile is not followed: the next Scan
	// passes it over (bounded: each try takes one transcript out).
	for range 8 {
		p, _, changed := r.finder.Scan()
		switch {
		case !changed:
			return
		case p == "":
			r.stop()
			return
		case !r.start(p):
			continue
		}
		if !first && r.finder.PickedNew() {
			// A session that started while the workdir was followed: all
			// of it is news, none of it history. (One left over, taken
			// when another agent's hook claimed the one followed, is not.)
			r.historyEnd = 0
		}
		r.read(ctx)
		return
	}
}

// stop follows no transcript (none is left that is not another agent's).
func (r *transcriptReader) stop() {
	if r.tail == nil {
		return
	}
	r.f.c.log.Info("no longer following transcript", "path", r.tail.Path)
	if r.dir != "" && !r.watching[r.dir] {
		r.w.Remove(r.dir)
	}
	r.tail, r.tracker, r.dir = nil, nil, ""
	r.f.mu.Lock()
	r.f.path = ""
	r.f.mu.Unlock()
	r.f.c.o.TranscriptClaims.Release(r.f.c.o.Agent)
}

// start follows path: it watches its directory and goes on from the
// offset saved for it. It reports false, and follows nothing new, when
// path is another agent's.
func (r *transcriptReader) start(path string) bool {
	f := r.f
	if !f.c.o.TranscriptClaims.Guess(f.c.o.Agent, path) {
		return false
	}
	if r.dir != "" && !r.watching[r.dir] {
		r.w.Remove(r.dir)
	}
	r.dir = filepath.Dir(path)
	if err := r.w.Add(r.dir); err != nil {
		f.c.log.Warn("cannot watch the transcript's directory", "dir", r.dir, "err", err)
	}
	saved, ok := f.loadOffset(path)
	r.tail = &transcript.Tail{Path: path, Offset: saved.Offset, Inode: saved.Inode, Opener: f.c.o.Opener}
	r.tracker, r.historyEnd = nil, 0
	if fi, err := os.Stat(path); err == nil && !ok {
		r.historyEnd = fi.Size()
	}
	f.mu.Lock()
	f.path = path
	f.mu.Unlock()
	f.c.log.Info("following transcript", "path", path)
	return true
}

// read reads what was appended to the transcript and signals what it says.
func (r *transcriptReader) read(ctx context.Context) {
	if r.tail == nil {
		return
	}
	if r.f.c.o.TranscriptClaims.TakenFrom(r.f.c.o.Agent, r.tail.Path) {
		// Another agent's hook named it: not one more line is this agent's.
		r.rescan(ctx)
		return
	}
	for range 64 { // bounded per wake-up; a long backlog continues at the next event
		if !r.readChunk(ctx) {
			return
		}
	}
}

// readChunk reads and signals up to 4 MiB of new lines and saves the
// offset; it returns whether there may be more to read now.
func (r *transcriptReader) readChunk(ctx context.Context) bool {
	lines, truncated, err := r.tail.ReadNew(4 << 20)
	if err != nil {
		r.readFailed(err)
		return false
	}
	if truncated {
		r.tracker = nil
	}
	usage, compactions, plan := r.track(lines)
	if r.tracker != nil {
		r.f.notePoint(r.tail.Path, r.tracker.State())
	}
	if plan != nil {
		r.f.plan(ctx, plan)
	}
	for _, cp := range compactions {
		r.f.signal(ctx, &capsule.Signal{Kind: capsule.SignalCompaction, Phase: "post", Trigger: cp.Trigger, Via: "transcript", TranscriptPath: r.tail.Path})
	}
	if usage != nil && usage.Window > 0 && math.Abs(usage.Fraction-r.lastFrac) >= 0.01 {
		r.lastFrac = usage.Fraction
		fr, tok, win := usage.Fraction, usage.Tokens, usage.Window
		sig := &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &fr, Tokens: &tok, Window: &win, Via: "transcript", TranscriptPath: r.tail.Path}
		if r.tracker != nil {
			// Whose figure it is: a status line of another session
			// does not show it as its own.
			sig.SessionID = r.tracker.State().SessionID
		}
		r.f.signal(ctx, sig)
	}
	r.f.saveOffset(r.tail)
	return len(lines) > 0
}

// readFailed deals with a failed read: a transcript the safe-file checks
// refuse is dropped, anything else is tried again at the next event.
func (r *transcriptReader) readFailed(err error) {
	var refused *safefile.Error
	if errors.As(err, &refused) {
		// Said once: the transcript is dropped until a hook
		// names one again.
		r.f.c.log.Warn("transcript refused, not read", "err", err)
		r.stop()
		return
	}
	if !errors.Is(err, os.ErrNotExist) {
		r.f.c.log.Debug("transcript read", "err", err)
	}
}

// track feeds lines (which end at the tail's offset) to the tracker and
// returns the last context usage they show (nil when a compaction came
// after it) and the compactions past historyEnd.
func (r *transcriptReader) track(lines [][]byte) (*transcript.Usage, []transcript.Compaction, *livePlan) {
	var usage *transcript.Usage
	var plan *livePlan
	compactions := []transcript.Compaction{}
	pos := r.tail.Offset
	for _, l := range lines {
		pos -= int64(len(l)) + 1
	}
	for _, l := range lines {
		pos += int64(len(l)) + 1
		if r.tracker == nil {
			format, ok := transcript.DetectFormat(l)
			if !ok {
				continue
			}
			r.tracker = transcript.NewTrackerWith(format, transcript.Options{RedactStep: r.f.c.guard.Redact})
		}
		u, err := r.tracker.Line(l)
		if err != nil {
			continue
		}
		if u.Usage != nil {
			uu := *u.Usage
			usage = &uu
		}
		if u.Compaction != nil {
			if pos > r.historyEnd {
				compactions = append(compactions, *u.Compaction)
			}
			usage = nil
		}
		if u.Tools != nil && pos > r.historyEnd {
			// Whose work a change is: the calls made while followed (the
			// history's are long matched or never will be).
			r.f.c.transcriptTools(u.Tools, r.tracker.State().Cwd)
		}
		if u.Plan != nil {
			// Unlike a compaction, a plan read from history is the plan now.
			plan = &livePlan{steps: u.Plan.Steps, live: pos > r.historyEnd}
		}
	}
	return usage, compactions, plan
}

// livePlan is the last plan a batch of lines stated; live when it was
// written after following began (not history).
type livePlan struct {
	steps []capsule.PlanStep
	live  bool
}

// plan stores the agent's plan and, for a plan written while followed,
// offers its step in progress to the policy as the next action (applied
// only where the agent has not written one more recently).
func (f *transcriptFollower) plan(ctx context.Context, p *livePlan) {
	seq, err := f.c.store.SetPlan(ctx, p.steps)
	if err != nil {
		if ctx.Err() == nil {
			f.c.log.Warn("cannot store the agent's plan", "err", err)
		}
		return
	}
	if seq == 0 || !p.live {
		return
	}
	if cur, ok := capsule.CurrentPlanStep(p.steps); ok {
		next := cur.Step
		f.c.feed(policy.Input{Kind: policy.KindDerived, At: time.Now(),
			Derived: &policy.Derived{Source: "plan", ChangedAt: time.Now(), NextAction: &next}})
	}
}

// signal stores a signal derived from the transcript.
func (f *transcriptFollower) signal(ctx context.Context, s *capsule.Signal) {
	raw, _ := json.Marshal(s)
	sig, err := f.c.guard.DecodeSignal(raw)
	if err != nil {
		f.c.log.Debug("transcript signal refused", "err", err)
		return
	}
	if _, err := f.c.store.Signal(ctx, sig); err != nil && ctx.Err() == nil {
		f.c.log.Warn("cannot store a transcript signal", "err", err)
	}
}

func (f *transcriptFollower) offsetsPath() string { return filepath.Join(f.c.o.Dir, offsetsFile) }

func (f *transcriptFollower) loadOffset(path string) (savedOffset, bool) {
	m := map[string]savedOffset{}
	raw, err := os.ReadFile(f.offsetsPath())
	if err == nil {
		json.Unmarshal(raw, &m)
	}
	s, ok := m[path]
	return s, ok
}

// saveOffset records where the transcript was read up to. It keeps only
// the current transcript's entry: older sessions are not read again.
func (f *transcriptFollower) saveOffset(t *transcript.Tail) {
	raw, _ := json.Marshal(map[string]savedOffset{t.Path: {Offset: t.Offset, Inode: t.Inode}})
	if err := atomicfile.ReplaceFile(f.offsetsPath(), raw, 0o600); err != nil {
		f.c.log.Debug("cannot save the transcript offset", "err", err)
	}
}
