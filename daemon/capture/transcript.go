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
	t := f.c.cfg.Transcripts
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

// discover finds the newest transcript for the agent's workdir.
func (f *transcriptFollower) discover() string {
	t, wd := f.c.cfg.Transcripts, f.c.workdir
	var best string
	var bestMod time.Time
	consider := func(p string, err error) {
		if err != nil || p == "" {
			return
		}
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(bestMod) {
			best, bestMod = p, fi.ModTime()
		}
	}
	if t.ClaudeHome != "" {
		consider(transcript.LatestClaudeTranscript(transcript.ClaudeProjectDir(t.ClaudeHome, wd)))
	}
	if t.CodexHome != "" {
		consider(transcript.LatestCodexRollout(filepath.Join(t.CodexHome, "sessions"), wd))
	}
	return best
}

// run follows transcripts until ctx ends: the newest one for the workdir,
// then whichever a hook names. It wakes on file events only.
func (f *transcriptFollower) run(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.c.log.Warn("cannot follow transcripts", "err", err)
		return
	}
	defer w.Close()
	var (
		tail    *transcript.Tail
		tracker *transcript.Tracker
		dir     string
		// historyEnd is the size of a transcript seen for the first time
		// when following began: what lies before it is history, not news.
		historyEnd int64
	)
	start := func(path string) {
		if dir != "" {
			w.Remove(dir)
		}
		dir = filepath.Dir(path)
		if err := w.Add(dir); err != nil {
			f.c.log.Warn("cannot watch the transcript's directory", "dir", dir, "err", err)
		}
		saved, ok := f.loadOffset(path)
		tail = &transcript.Tail{Path: path, Offset: saved.Offset, Inode: saved.Inode}
		tracker, historyEnd = nil, 0
		if fi, err := os.Stat(path); err == nil && !ok {
			historyEnd = fi.Size()
		}
		f.mu.Lock()
		f.path = path
		f.mu.Unlock()
		f.c.log.Info("following transcript", "path", path)
	}
	var lastFrac float64 = -1
	read := func() {
		if tail == nil {
			return
		}
		for range 64 { // bounded per wake-up; a long backlog continues at the next event
			lines, truncated, err := tail.ReadNew(4 << 20)
			if err != nil {
				var refused *safefile.Error
				if errors.As(err, &refused) {
					// Said once: the transcript is dropped until a hook
					// names one again.
					f.c.log.Warn("transcript refused, not read", "err", err)
					tail = nil
					f.mu.Lock()
					f.path = ""
					f.mu.Unlock()
					return
				}
				if !errors.Is(err, os.ErrNotExist) {
					f.c.log.Debug("transcript read", "err", err)
				}
				return
			}
			if truncated {
				tracker = nil
			}
			var usage *transcript.Usage
			compactions := []transcript.Compaction{}
			pos := tail.Offset
			for _, l := range lines {
				pos -= int64(len(l)) + 1
			}
			for _, l := range lines {
				pos += int64(len(l)) + 1
				if tracker == nil {
					format, ok := transcript.DetectFormat(l)
					if !ok {
						continue
					}
					tracker = transcript.NewTracker(format)
				}
				u, err := tracker.Line(l)
				if err != nil {
					continue
				}
				if u.Usage != nil {
					uu := *u.Usage
					usage = &uu
				}
				if u.Compaction != nil {
					if pos > historyEnd {
						compactions = append(compactions, *u.Compaction)
					}
					usage = nil
				}
			}
			for _, cp := range compactions {
				f.signal(ctx, &capsule.Signal{Kind: capsule.SignalCompaction, Phase: "post", Trigger: cp.Trigger, Via: "transcript", TranscriptPath: tail.Path})
			}
			if usage != nil && usage.Window > 0 && math.Abs(usage.Fraction-lastFrac) >= 0.01 {
				lastFrac = usage.Fraction
				fr, tok, win := usage.Fraction, usage.Tokens, usage.Window
				f.signal(ctx, &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &fr, Tokens: &tok, Window: &win, Via: "transcript", TranscriptPath: tail.Path})
			}
			f.saveOffset(tail)
			if len(lines) == 0 {
				return
			}
		}
	}
	if p := f.discover(); p != "" {
		start(p)
		read()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-f.switch_:
			start(p)
			read()
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if tail != nil && filepath.Clean(ev.Name) == filepath.Clean(tail.Path) && ev.Op&(fsnotify.Write|fsnotify.Create) != 0 {
				read()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			f.c.log.Debug("transcript watch", "err", err)
			read() // an overflow may have hidden writes
		}
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

func (f *transcriptFollower) offsetsPath() string { return filepath.Join(f.c.dir, offsetsFile) }

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
