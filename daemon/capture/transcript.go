package capture

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
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
	return &transcriptFollower{c: c, switch_: make(chan string, 1)}
}

// allowed reports whether path lies in a configured transcript home: a
// hook payload names the transcript, and the daemon reads only there.
func (f *transcriptFollower) allowed(path string) bool {
	t := f.c.o.Transcripts
	path = filepath.Clean(path)
	for _, home := range []string{t.ClaudeHome, t.CodexHome} {
		if home != "" && strings.HasPrefix(path, filepath.Clean(home)+string(filepath.Separator)) {
			return strings.HasSuffix(path, ".jsonl")
		}
	}
	return false
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
// say (a watch limit reached, a home created after the start).
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
	r := &transcriptReader{f: f, w: w, lastFrac: -1, finder: transcript.NewFinder(t.ClaudeHome, t.CodexHome, f.c.o.Workdir)}
	r.rescan(ctx)
	var rescan <-chan time.Time // nil: the watches alone
	if t.Rescan > 0 {
		tick := time.NewTicker(t.Rescan)
		defer tick.Stop()
		rescan = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-f.switch_:
			r.finder.Follow(p)
			r.start(p)
			r.read(ctx)
		case <-rescan:
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
	for _, chain := range r.finder.WatchChains(time.Now()) {
		r.sessionDirs[chain[0]] = true
		for _, d := range chain[1:] {
			r.chainDirs[d] = true
		}
		// Parents first, so that a folder created between two Adds is
		// either watched or seen by the Scan below.
		for i := len(chain) - 1; i >= 0; i-- {
			if d := chain[i]; !r.watching[d] && r.w.Add(d) == nil {
				r.watching[d] = true
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
	if p, _, changed := r.finder.Scan(); changed && p != "" {
		r.start(p)
		if !first {
			// A session that started while the workdir was followed: all
			// of it is news, none of it history.
			r.historyEnd = 0
		}
		r.read(ctx)
	}
}

// start follows path: it watches its directory and goes on from the
// offset saved for it.
func (r *transcriptReader) start(path string) {
	f := r.f
	if r.dir != "" && !r.watching[r.dir] {
		r.w.Remove(r.dir)
	}
	r.dir = filepath.Dir(path)
	if err := r.w.Add(r.dir); err != nil {
		f.c.log.Warn("cannot watch the transcript's directory", "dir", r.dir, "err", err)
	}
	saved, ok := f.loadOffset(path)
	r.tail = &transcript.Tail{Path: path, Offset: saved.Offset, Inode: saved.Inode}
	r.tracker, r.historyEnd = nil, 0
	if fi, err := os.Stat(path); err == nil && !ok {
		r.historyEnd = fi.Size()
	}
	f.mu.Lock()
	f.path = path
	f.mu.Unlock()
	f.c.log.Info("following transcript", "path", path)
}

// read reads what was appended to the transcript and signals what it says.
func (r *transcriptReader) read(ctx context.Context) {
	if r.tail == nil {
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
		r.f.signal(ctx, &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &fr, Tokens: &tok, Window: &win, Via: "transcript", TranscriptPath: r.tail.Path})
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
		r.tail = nil
		r.f.mu.Lock()
		r.f.path = ""
		r.f.mu.Unlock()
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
