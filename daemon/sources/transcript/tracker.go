package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// Usage is how full an agent's context window is (capsule's: the
// statusline reads it too).
type Usage = capsule.ContextUsage

// NewUsage builds a Usage from raw numbers (capsule.NewContextUsage).
func NewUsage(tokens, window int64) Usage { return capsule.NewContextUsage(tokens, window) }

// Compaction is one compaction of the context, as the transcript marks it.
type Compaction struct {
	// Trigger is "manual", "auto", or "" when the transcript does not say
	// (Codex never does) or says something else.
	Trigger string
	// PreTokens is the context size just before compacting: Claude Code's
	// compactMetadata.preTokens; for Codex, which records none, the last
	// usage seen before the marker. 0 means unknown.
	PreTokens int64
	// PostTokens is the context size right after compacting, when the
	// transcript records it (Claude Code's compactMetadata.postTokens in
	// newer versions). 0 means unknown.
	PostTokens int64
}

// Update is what one line changed. The zero Update means nothing the
// daemon tracks.
type Update struct {
	// Usage is non-nil when this line changed the known context usage: a
	// new main-chain model response whose numbers differ from the last
	// known ones, or the first one after a compaction.
	Usage *Usage
	// Compaction is non-nil when this line is a compaction marker. After
	// it the usage is unknown (State.Usage is nil) until the next model
	// response.
	Compaction *Compaction
	// SessionID is set when this line reveals a session id different from
	// the one known so far.
	SessionID string
	// Cwd is set when this line reveals a working directory different from
	// the one known so far.
	Cwd string
	// Plan is non-nil when this line stated the agent's plan and the plan
	// differs from the last one stated: it is then the whole plan, to
	// store in place of the old one (Steps empty: the plan is now empty).
	Plan *Plan // Tools is non-nil when this line completed tool calls that changed
	// files or ran a shell (tools.go).
	Tools *ToolCalls
}

// State is what a Tracker knows after the lines it consumed.
type State struct {
	Format    Format
	SessionID string // "" until a line reveals it
	Cwd       string // "" until a line reveals it
	// Usage is the latest known context usage; nil before the first model
	// response and after a compaction until the next one.
	Usage *Usage
	// Compactions counts compaction markers; LastCompaction is the latest.
	Compactions    int
	LastCompaction *Compaction
	// Plan is the agent's latest plan; nil until a line stated one.
	Plan *Plan
	// LastMessageID locates the conversation's latest point, for a
	// snapshot to record which turn it matches: Claude Code's uuid of the
	// latest main-chain user or assistant entry; Codex's id of the latest
	// response item, or, for versions that write no item ids (before
	// 0.146), the turn_id of the latest turn. "" until a line names one.
	LastMessageID string
	// Lines counts every line passed to Line, Malformed those that were
	// not well-formed JSON objects.
	Lines, Malformed int64
}

// Options tunes a Tracker.
type Options struct {
	// WindowFor returns the context window, in tokens, of a Claude Code
	// model, as named in the transcript's message.model; 0 means unknown.
	// Claude Code does not write the window into the transcript, so the
	// daemon should pass what it learned elsewhere (the statusline's
	// context_window_size). Nil means DefaultClaudeWindow. Codex rollouts
	// carry their window and ignore this.
	WindowFor func(model string) int64
	// RedactStep redacts credentials in a plan step's text (it gets the
	// text as one line, and returns it with each credential replaced).
	// Nil means DefaultRedactStep; the daemon should pass its Guard's
	// Redact, which knows more credential shapes.
	RedactStep func(string) string
}

// DefaultClaudeWindow is the window guess used when no better source is
// known: 1,000,000 tokens for a model id marked "[1m]" (the form Claude
// Code uses for its 1M-context variants), else 200,000. The API model names
// in transcripts carry no such mark, so a 1M session is under-estimated
// (its Fraction saturates at 1) unless Options.WindowFor knows better.
func DefaultClaudeWindow(model string) int64 {
	if strings.Contains(strings.ToLower(model), "[1m]") {
		return 1_000_000
	}
	return 200_000
}

// ErrMalformed is wrapped by the errors Line returns for lines that are not
// well-formed JSON objects.
var ErrMalformed = errors.New("transcript: malformed line")

var errNotObject = errors.New("not a JSON object")

// Tracker consumes a transcript's lines in file order and keeps what the
// daemon needs: the session, the latest context usage, the compactions and
// the agent's plan.
// A Tracker is not safe for concurrent use; one goroutine owns a transcript.
type Tracker struct {
	format     Format
	windowFor  func(model string) int64
	redactStep func(string) string

	sessionID, cwd string
	lastMessage    string
	usage          Usage
	hasUsage       bool
	compactions    int
	last           Compaction
	lines, bad     int64

	claude claudeState
	codex  codexState
	plan   planState
	tools  pendingCalls // edit and shell calls waiting for their results
}

// NewTracker returns a Tracker for format f with default options.
func NewTracker(f Format) *Tracker { return NewTrackerWith(f, Options{}) }

// NewTrackerWith returns a Tracker for format f with options o.
func NewTrackerWith(f Format, o Options) *Tracker {
	t := &Tracker{format: f, windowFor: o.WindowFor, redactStep: o.RedactStep}
	if t.windowFor == nil {
		t.windowFor = DefaultClaudeWindow
	}
	if t.redactStep == nil {
		t.redactStep = DefaultRedactStep
	}
	t.claude.init()
	return t
}

// Line consumes one JSONL line (with or without its trailing newline). A
// blank line is ignored. A line that is not a well-formed JSON object
// returns an error wrapping ErrMalformed and leaves the tracker as it was,
// except for the Lines and Malformed counters. A well-formed line of an
// unknown or changed shape is not an error: what cannot be read from it is
// ignored.
func (t *Tracker) Line(line []byte) (Update, error) {
	t.lines++
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Update{}, nil
	}
	var (
		u   Update
		err error
	)
	switch t.format {
	case ClaudeCode:
		if u, err = t.claudeLine(line); err == nil {
			t.claudePlan(&u, line)
			t.claudeTools(&u, line)
		}
	case Codex:
		if u, err = t.codexLine(line); err == nil {
			t.codexPlan(&u, line)
			t.codexTools(&u, line)
		}
	default:
		return Update{}, fmt.Errorf("transcript: unknown format %d", int(t.format))
	}
	if err != nil {
		t.bad++
		return Update{}, fmt.Errorf("%w: line %d: %v", ErrMalformed, t.lines, err)
	}
	return u, nil
}

// State returns a copy of what the tracker knows.
func (t *Tracker) State() State {
	s := State{
		Format:      t.format,
		SessionID:   t.sessionID,
		Cwd:         t.cwd,
		Compactions: t.compactions,
		Lines:       t.lines,
		Malformed:   t.bad,
		Plan:        t.plan.statePlan(),

		LastMessageID: t.lastMessage,
	}
	if t.hasUsage {
		u := t.usage
		s.Usage = &u
	}
	if t.compactions > 0 {
		c := t.last
		s.LastCompaction = &c
	}
	return s
}

// observeUsage records a new usage reading and reports it if it differs
// from what was known.
func (t *Tracker) observeUsage(u *Update, tokens, window int64) {
	nu := NewUsage(tokens, window)
	if t.hasUsage && t.usage == nu {
		return
	}
	t.usage, t.hasUsage = nu, true
	u.Usage = &nu
}

// observeCompaction records a compaction marker; the usage becomes unknown
// because the context was just rewritten.
func (t *Tracker) observeCompaction(u *Update, c Compaction) {
	t.compactions++
	t.last = c
	t.hasUsage = false
	t.usage = Usage{}
	u.Compaction = &c
}

// observeSession records a session id if it is well-formed and new.
func (t *Tracker) observeSession(u *Update, id string) {
	if validSessionID(id) && id != t.sessionID {
		t.sessionID = id
		u.SessionID = id
	}
}

// observeMessage records the id of the conversation's latest point if it
// is id-shaped.
func (t *Tracker) observeMessage(id string) {
	if validSessionID(id) {
		t.lastMessage = id
	}
}

// observeCwd records a working directory if it is well-formed and new.
func (t *Tracker) observeCwd(u *Update, dir string) {
	if validCwd(dir) && dir != t.cwd {
		t.cwd = dir
		u.Cwd = dir
	}
}

// trigger keeps a compaction trigger only if it is one of the known
// markers; anything else is text and is dropped.
func trigger(s string) string {
	switch s {
	case "manual", "auto":
		return s
	}
	return ""
}

// recent remembers the last n keys seen, in bounded memory: enough to
// recognise a record repeated a few lines later without growing with the
// transcript.
type recent struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecent(n int) recent {
	return recent{ring: make([]string, max(n, 1)), set: make(map[string]struct{}, n)}
}

// seen reports whether key was added recently; if not, it adds it,
// forgetting the oldest key when full.
func (r *recent) seen(key string) bool {
	if r.ring == nil {
		*r = newRecent(64) // a Tracker built without NewTracker still works
	}
	if _, ok := r.set[key]; ok {
		return true
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = key
	r.set[key] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
	return false
}
