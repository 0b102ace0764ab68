package attribution

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/toolpaths"
)

// How a change was credited.
const (
	KindEdit       = "edit"       // an edit tool's hook (Edit, Write, MultiEdit, NotebookEdit, apply_patch)
	KindTranscript = "transcript" // the same calls, read from the agent's transcript (no hook ran)
	KindShell      = "shell"      // changed while the agent's shell tool ran
	KindOutside    = "outside"    // nobody claimed it: a person, an editor, another program
)

// Labels of who changed a path, as an agent sees them (interface.md, "Who
// changed what").
const (
	LabelSelf    = "agent"   // the agent looking
	LabelOutside = "outside" // nobody claimed it
	labelOther   = "agent:"  // + the other agent's name
)

// Label names who changed a path as viewer sees it: "agent" for its own
// changes, "agent:NAME" for another agent's, "outside" for nobody's (by "").
func Label(viewer, by string) string {
	switch by {
	case "":
		return LabelOutside
	case viewer:
		return LabelSelf
	}
	return labelOther + by
}

// ToolEvent is what an agent's tool call claims: it changed these paths
// (relative to the workdir, as Resolver.Rel gives them) at At. Kind is
// KindEdit (from a hook) or KindTranscript.
type ToolEvent struct {
	Agent string
	Kind  string
	Paths []string
	At    time.Time
}

// Burst is what the workdir watcher saw: these paths changed at At (when
// the changes happened, not when the burst was flushed). Key names the
// burst when every agent on the workdir is told the same one (the shared
// watcher fans each out): the ledger credits a key once, whichever agent
// reports it first, so no agent has to be the one that reports (and a
// workdir's changes are still credited when that one is down). "" :
// always credited.
type Burst struct {
	Paths []string
	At    time.Time
	Key   string
}

// Change is one path credited to whoever changed it. By is the agent's
// name, "" for outside.
type Change struct {
	Path string    `json:"path"`
	By   string    `json:"by"`
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
}

// Conflict is a path that several agents changed, none of them since
// checkpointing past it.
type Conflict struct {
	Path   string    `json:"path"`
	Agents []string  `json:"agents"` // sorted
	At     time.Time `json:"at"`     // the latest of their changes
}

// ByOther is a path another agent, or someone outside, changed since an
// agent's last visit; By is a Label ("agent:NAME" or "outside").
type ByOther struct {
	Path string `json:"path"`
	By   string `json:"by"`
}

// Result is what one call to the ledger decided: the changes it credited
// (or credited anew: a change first seen as outside that a late claim
// explains), and the conflicts that arose, to tell both agents.
type Result struct {
	Credits   []Change
	Conflicts []Conflict
	// Expired are the shell windows this call found open past
	// Options.MaxShell, closed there: a tool call whose end never came.
	Expired []ShellWindow
}

// ShellWindow is an agent's shell tool call: what changed from Start to
// End (and Slack after) counts as the agent's.
type ShellWindow struct {
	Agent      string
	Start, End time.Time
}

// Options bound a Ledger.
type Options struct {
	// Slack is how far apart in time a claim and the change it explains
	// may be: a hook's PostToolUse comes after the file changed, the
	// watcher reports a change after its quiet period, and a transcript is
	// read later still (its lines carry the time of the call). 0 means
	// DefaultSlack.
	Slack time.Duration
	// MaxPaths bounds the paths whose history is kept (the least recently
	// changed are forgotten first). 0 means DefaultMaxPaths.
	MaxPaths int
	// MaxHistory bounds the changes kept per path. 0 means
	// DefaultMaxHistory.
	MaxHistory int
	// MaxShell bounds a shell window whose end (PostToolUse) never comes
	// (an interrupted call): it closes MaxShell after its start, or at
	// the agent's Stop or session end (EndShells), whichever is first, so
	// that a person's edits after it are never the agent's. 0 means
	// DefaultMaxShell.
	MaxShell time.Duration
	// Since is when the ledger began to be told of the workdir's changes
	// (the daemon's start): it knows nothing of what changed before, so a
	// question about earlier changes (a restore of an older snapshot) has
	// no answer here. Zero: unknown, no question about the past is
	// answered (Knows).
	Since time.Time
	// Changed, when set, is called after each change of what State
	// returns (a keeper saves the ledger then), with the ledger's lock
	// held: it must not block or call the ledger.
	Changed func()
}

// Defaults of Options.
const (
	DefaultSlack      = 5 * time.Second
	DefaultMaxPaths   = 20000
	DefaultMaxHistory = 8
	// DefaultMaxShell is the longest a shell tool call counts as the
	// agent's without its end: Claude Code's Bash tool is cut at 10
	// minutes at most, as are Codex's commands by default.
	DefaultMaxShell = 10 * time.Minute
	// maxShells bounds the shell windows remembered after they closed.
	maxShells = 64
	// maxBursts bounds the burst keys remembered: every agent on a
	// workdir reports a burst within moments of the others.
	maxBursts = 256
	// maxClaims bounds the claims waiting for the change they explain.
	maxClaims = 4 * toolpaths.MaxPathsPerCall
)

// Ledger credits each change in a shared workdir to the agent whose tool
// made it. It is pure bookkeeping: time comes in with each event, nothing
// is read from disk, and the same events give the same answers. It is safe
// for concurrent use.
//
// A change (a Burst path) is credited, in this order, to the agent whose
// edit claim on that path is nearest in time (within Slack), to the agents
// whose shell tool was running then (or had ended less than Slack before),
// else to outside. Claims and shell starts that arrive after the change
// they explain (a hook is slower than the watcher) credit it anew when it
// was outside.
type Ledger struct {
	mu  sync.Mutex
	opt Options

	claims     map[string][]claim // by path, oldest first: waiting to explain a change
	claimOrder []string           // the path of every claim held, oldest first (for the bound)
	shells     map[string]*window // by agent + "\x00" + tool call id
	closed     []*window          // ended, newest last
	paths      map[string][]Change
	ages       ages // the paths by their latest change, for forgetOldestPath
	// byTime is every change held (and some dropped since), by time, for
	// ByOthers; byTimeBuilt its length when last built (noteTime).
	byTime      []timeEntry
	byTimeBuilt int
	// pending holds, per agent, the paths it changed since its last
	// checkpoint: a path held by two agents is a conflict.
	pending map[string]map[string]time.Time
	visits  map[string]time.Time
	gen     uint64 // counts the changes to State
	// dirty are the paths whose history or open work changed since the
	// last TakeDelta or TakeState, visitsDirty the visits: what a keeper
	// appends to its journal instead of the whole State. Kept once a
	// keeper took the State (tracking): a ledger nobody keeps does not
	// gather every path it ever saw.
	dirty       map[string]struct{}
	visitsDirty bool
	tracking    bool
	// bursts are the keys of the bursts credited lately, oldest first.
	bursts []string
}

type claim struct {
	agent, kind string
	at          time.Time
}

type window struct {
	agent      string
	start, end time.Time // end zero while the tool runs
	// exact: end is when the call had surely ended (the agent stopped,
	// or the bound), not a PostToolUse the watcher's changes may trail:
	// nothing after it is the window's.
	exact bool
}

// touch notes that p's changes or open work changed (TakeDelta). Called
// with l.mu held.
func (l *Ledger) touch(p string) {
	if l.tracking {
		l.dirty[p] = struct{}{}
	}
}

// bump counts a change of the state (Generation) and tells Options.Changed.
// Called with l.mu held.
func (l *Ledger) bump() {
	l.gen++
	if l.opt.Changed != nil {
		l.opt.Changed()
	}
}

// New makes an empty Ledger.
func New(o Options) *Ledger {
	if o.Slack <= 0 {
		o.Slack = DefaultSlack
	}
	if o.MaxPaths <= 0 {
		o.MaxPaths = DefaultMaxPaths
	}
	if o.MaxHistory <= 0 {
		o.MaxHistory = DefaultMaxHistory
	}
	if o.MaxShell <= 0 {
		o.MaxShell = DefaultMaxShell
	}
	return &Ledger{opt: o, claims: map[string][]claim{}, shells: map[string]*window{}, paths: map[string][]Change{},
		pending: map[string]map[string]time.Time{}, visits: map[string]time.Time{}, dirty: map[string]struct{}{}}
}

func checkAgent(agent string) error {
	if agent == "" {
		return fmt.Errorf("attribution: a tool event with no agent")
	}
	return toolpaths.CheckPath(agent) // a name: same shape rules as a path's
}

func checkPaths(paths []string) error {
	if len(paths) > maxClaims {
		return fmt.Errorf("attribution: %d paths in one event (at most %d)", len(paths), maxClaims)
	}
	for _, p := range paths {
		if err := validRel(p); err != nil {
			return fmt.Errorf("attribution: %w", err)
		}
	}
	return nil
}

// Tool records what an agent's tool call claims, and credits to it the
// changes of those paths that were seen first and credited to outside.
func (l *Ledger) Tool(ev ToolEvent) (Result, error) {
	if err := checkAgent(ev.Agent); err != nil {
		return Result{}, err
	}
	if ev.Kind != KindEdit && ev.Kind != KindTranscript {
		return Result{}, fmt.Errorf("attribution: a tool event of kind %q (edit or transcript)", ev.Kind)
	}
	if err := checkPaths(ev.Paths); err != nil {
		return Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	var res Result
	for _, p := range dedupe(ev.Paths) {
		l.claims[p] = append(l.claims[p], claim{agent: ev.Agent, kind: ev.Kind, at: ev.At})
		l.claimOrder = append(l.claimOrder, p)
		if i, ok := l.lastOutside(p, func(at time.Time) bool { return within(at, ev.At, l.opt.Slack) }); ok {
			l.recredit(&res, p, i, ev.Agent, ev.Kind)
		} else {
			l.reclaimFromShells(&res, p, ev)
		}
	}
	for len(l.claimOrder) > maxClaims {
		// Forget the oldest claim: the first of its path's.
		p := l.claimOrder[0]
		l.claimOrder = l.claimOrder[1:]
		if rest := l.claims[p][1:]; len(rest) > 0 {
			l.claims[p] = rest
		} else {
			delete(l.claims, p)
		}
	}
	return res, nil
}

// ShellStart records that an agent's shell tool call id began at at
// (PreToolUse): what changes until it ends counts as the agent's. Changes
// seen since at and credited to outside are credited to it.
func (l *Ledger) ShellStart(agent, id string, at time.Time) (Result, error) {
	if err := checkAgent(agent); err != nil {
		return Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	expired := l.expireShells(at)
	w := &window{agent: agent, start: at}
	l.shells[agent+"\x00"+id] = w
	if len(l.shells) > maxShells {
		// A PostToolUse that never came: forget the oldest start.
		l.dropOldestShell()
	}
	res := l.recreditWindow(w)
	res.Expired = expired
	return res, nil
}

// SetMaxShell changes Options.MaxShell (0: DefaultMaxShell).
func (l *Ledger) SetMaxShell(d time.Duration) {
	if d <= 0 {
		d = DefaultMaxShell
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	l.opt.MaxShell = d
}

// EndShells closes every shell window of agent still open at at: the
// agent stopped (its turn ended) or its session ended, so a tool call
// whose end never came (an interrupted one) has ended by then.
func (l *Ledger) EndShells(agent string, at time.Time) []ShellWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	var ended []ShellWindow
	for _, key := range slices.Sorted(maps.Keys(l.shells)) {
		if w := l.shells[key]; w.agent == agent && !at.Before(w.start) {
			l.closeShell(key, earlier(at, w.start.Add(l.opt.MaxShell)), true)
			ended = append(ended, ShellWindow{Agent: w.agent, Start: w.start, End: w.end})
		}
	}
	return ended
}

// expireShells closes, at their bound, the windows open longer than
// MaxShell at now, and returns them.
func (l *Ledger) expireShells(now time.Time) []ShellWindow {
	var expired []ShellWindow
	for _, key := range slices.Sorted(maps.Keys(l.shells)) {
		w := l.shells[key]
		if bound := w.start.Add(l.opt.MaxShell); now.After(bound) {
			l.closeShell(key, bound, true)
			expired = append(expired, ShellWindow{Agent: w.agent, Start: w.start, End: w.end})
		}
	}
	return expired
}

// closeShell ends the open window key at end (exact: see window) and
// keeps it among the recently closed.
func (l *Ledger) closeShell(key string, end time.Time, exact bool) {
	w := l.shells[key]
	delete(l.shells, key)
	w.end, w.exact = end, exact
	if w.end.Before(w.start) {
		w.end = w.start
	}
	l.closed = append(l.closed, w)
	if len(l.closed) > maxShells {
		l.closed = slices.Delete(l.closed, 0, len(l.closed)-maxShells)
	}
}

// ShellEnd records that the shell tool call id ended at at (PostToolUse).
// Changes seen until Slack after it still count as the agent's: the
// watcher reports them after a quiet period. An end without its start is
// ignored.
func (l *Ledger) ShellEnd(agent, id string, at time.Time) (Result, error) {
	if err := checkAgent(agent); err != nil {
		return Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	key := agent + "\x00" + id
	w, ok := l.shells[key]
	if !ok {
		return Result{}, nil
	}
	bound := w.start.Add(l.opt.MaxShell)
	l.closeShell(key, earlier(at, bound), at.After(bound))
	return l.recreditWindow(w), nil
}

// Burst credits each changed path to whoever changed it.
func (l *Ledger) Burst(b Burst) (Result, error) {
	if err := checkPaths(b.Paths); err != nil {
		return Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // what ByOthers and Conflicts answer may have moved
	if b.Key != "" {
		if slices.Contains(l.bursts, b.Key) {
			return Result{}, nil // another agent on the workdir reported it
		}
		l.bursts = append(l.bursts, b.Key)
		if len(l.bursts) > maxBursts {
			l.bursts = slices.Delete(l.bursts, 0, len(l.bursts)-maxBursts)
		}
	}
	res := Result{Expired: l.expireShells(b.At)}
	for _, p := range dedupe(b.Paths) {
		by, kind := l.claimFor(p, b.At)
		if len(by) == 0 {
			l.record(&res, Change{Path: p, Kind: KindOutside, At: b.At})
			continue
		}
		for _, a := range by {
			l.record(&res, Change{Path: p, By: a, Kind: kind, At: b.At})
		}
	}
	return res, nil
}

// Checkpoint records that agent checkpointed at at: the paths it changed
// until then are no longer its open work, and a conflict on them ends.
func (l *Ledger) Checkpoint(agent string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bump()
	settled := false
	for p, t := range l.pending[agent] {
		if !t.After(at) {
			delete(l.pending[agent], p)
			l.touch(p)
			settled = true
		}
	}
	if settled {
		// Conflicts may have moved; a checkpoint with no open work (the
		// usual one) leaves resume's view as it was.
		viewstamp.Changed()
	}
}

// Visit records that agent looked (resumed) at at: ByOthers answers from
// there on.
func (l *Ledger) Visit(agent string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bump()
	start := 0
	if since := l.visits[agent]; !since.IsZero() && !at.IsZero() {
		if at.Before(since) {
			since = at // the earlier of the two: a visit may be told after a later one
		}
		start = l.firstAfter(nanos(since))
	}
	if start < len(l.byTime) {
		// ByOthers answers a change after the earlier visit one way or
		// the other; with none after it, it answers nothing either way.
		viewstamp.Changed()
	}
	l.visits[agent] = at
	l.visitsDirty = true
}

// claimFor returns who changed p at at: the agent of the nearest edit
// claim within Slack, else the agents whose shell window covers at, else
// nobody.
func (l *Ledger) claimFor(p string, at time.Time) ([]string, string) {
	var best *claim
	var bestGap time.Duration
	for i, c := range l.claims[p] {
		if !within(c.at, at, l.opt.Slack) {
			continue
		}
		gap := absDur(c.at.Sub(at))
		if best == nil || gap < bestGap || gap == bestGap && c.agent < best.agent {
			best, bestGap = &l.claims[p][i], gap
		}
	}
	if best != nil {
		return []string{best.agent}, best.kind
	}
	var agents []string
	for _, w := range l.windows() {
		if l.covers(w, at) && !slices.Contains(agents, w.agent) {
			agents = append(agents, w.agent)
		}
	}
	slices.Sort(agents)
	return agents, KindShell
}

// windows returns the open and the recently closed shell windows, in a
// fixed order.
func (l *Ledger) windows() []*window {
	ws := slices.Clone(l.closed)
	for _, w := range l.shells {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *window) int { return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.agent, b.agent)) })
	return ws
}

func (l *Ledger) covers(w *window, at time.Time) bool {
	if at.Before(w.start) {
		return false
	}
	end, exact := w.end, w.exact
	if end.IsZero() { // still open: never past its bound
		end, exact = w.start.Add(l.opt.MaxShell), true
	}
	if !exact {
		end = end.Add(l.opt.Slack)
	}
	return !at.After(end)
}

// recreditWindow credits to w's agent the outside changes it covers.
func (l *Ledger) recreditWindow(w *window) Result {
	var res Result
	paths := make([]string, 0, len(l.paths))
	for p := range l.paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if i, ok := l.lastOutside(p, func(at time.Time) bool { return l.covers(w, at) }); ok {
			l.recredit(&res, p, i, w.agent, KindShell)
		}
	}
	return res
}

// lastOutside finds the latest change of p credited to outside whose time
// match accepts.
func (l *Ledger) lastOutside(p string, match func(time.Time) bool) (int, bool) {
	hist := l.paths[p]
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].By == "" && match(hist[i].At) {
			return i, true
		}
	}
	return 0, false
}

// reclaimFromShells gives to ev's agent the latest change of p within
// Slack of ev that shell windows were credited with: an edit claim names
// its path, so it wins over a shell that merely ran then, as it does when
// it arrives before the change (claimFor). Arrival order must not decide
// whose a change is. The shells' agents no longer hold the path (no
// conflict from it) unless another change of theirs does.
func (l *Ledger) reclaimFromShells(res *Result, p string, ev ToolEvent) {
	hist := l.paths[p]
	var at time.Time
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Kind == KindShell && within(hist[i].At, ev.At, l.opt.Slack) {
			at = hist[i].At
			break
		}
	}
	if at.IsZero() {
		return
	}
	l.bump()
	l.touch(p)
	var released []string
	kept := hist[:0:0]
	for _, c := range hist {
		if c.Kind == KindShell && c.At.Equal(at) {
			if c.By != ev.Agent {
				released = append(released, c.By)
			}
			continue
		}
		kept = append(kept, c)
	}
	c := Change{Path: p, By: ev.Agent, Kind: ev.Kind, At: at}
	i, _ := slices.BinarySearchFunc(kept, at, func(x Change, t time.Time) int { return x.At.Compare(t) })
	l.paths[p] = slices.Insert(kept, i, c)
	l.noteAge(p)
	for _, agent := range released {
		l.release(agent, p)
	}
	res.Credits = append(res.Credits, c)
	l.hold(res, c)
}

// release drops p from agent's open work after a change of it was taken
// back, keeping it for the latest change of p still credited to agent.
func (l *Ledger) release(agent, p string) {
	held, ok := l.pending[agent][p]
	if !ok {
		return
	}
	l.touch(p)
	var latest time.Time
	for _, c := range l.paths[p] {
		if c.By == agent && !c.At.After(held) && c.At.After(latest) {
			latest = c.At
		}
	}
	if latest.IsZero() {
		delete(l.pending[agent], p)
		return
	}
	l.pending[agent][p] = latest
}

// recredit gives the outside change hist[i] of p to agent.
func (l *Ledger) recredit(res *Result, p string, i int, agent, kind string) {
	l.bump()
	l.touch(p)
	c := l.paths[p][i]
	c.By, c.Kind = agent, kind
	l.paths[p][i] = c
	res.Credits = append(res.Credits, c)
	l.hold(res, c)
}

// record keeps a change in p's history and, for an agent's, in its open
// work.
func (l *Ledger) record(res *Result, c Change) {
	l.bump()
	l.touch(c.Path)
	hist := append(l.paths[c.Path], c)
	if len(hist) > l.opt.MaxHistory {
		hist = slices.Delete(hist, 0, len(hist)-l.opt.MaxHistory)
	}
	l.paths[c.Path] = hist
	l.noteAge(c.Path)
	l.noteTime(c.At, c.Path)
	res.Credits = append(res.Credits, c)
	if c.By != "" {
		l.hold(res, c)
	}
	if len(l.paths) > l.opt.MaxPaths {
		l.forgetOldestPath()
	}
}

// hold adds c's path to its agent's open work and reports a conflict
// when the path becomes another agent's too.
func (l *Ledger) hold(res *Result, c Change) {
	mine := l.pending[c.By]
	if mine == nil {
		mine = map[string]time.Time{}
		l.pending[c.By] = mine
	}
	_, had := mine[c.Path]
	if t, ok := mine[c.Path]; !ok || c.At.After(t) {
		mine[c.Path] = c.At
		l.touch(c.Path)
	}
	if had {
		return
	}
	if conflict, ok := l.conflictOn(c.Path); ok {
		res.Conflicts = append(res.Conflicts, conflict)
	}
}

// conflictOn reports whether p is the open work of several agents.
func (l *Ledger) conflictOn(p string) (Conflict, bool) {
	c := Conflict{Path: p}
	for agent, paths := range l.pending {
		if t, ok := paths[p]; ok {
			c.Agents = append(c.Agents, agent)
			if t.After(c.At) {
				c.At = t
			}
		}
	}
	slices.Sort(c.Agents)
	return c, len(c.Agents) > 1
}

// forgetOldestPath forgets the path whose latest change is the oldest
// (ages). Called with l.mu held.
func (l *Ledger) forgetOldestPath() {
	oldest := l.oldestPath()
	if oldest == "" {
		return
	}
	heap.Pop(&l.ages)
	delete(l.paths, oldest)
	l.touch(oldest)
}

func (l *Ledger) dropOldestShell() {
	var key string
	var w *window
	for k, v := range l.shells {
		if w == nil || v.start.Before(w.start) || v.start.Equal(w.start) && k < key {
			key, w = k, v
		}
	}
	delete(l.shells, key)
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func within(a, b time.Time, slack time.Duration) bool { return absDur(a.Sub(b)) <= slack }

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func dedupe(paths []string) []string {
	out := slices.Clone(paths)
	slices.Sort(out)
	return slices.Compact(out)
}
