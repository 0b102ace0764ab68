package capture

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/daemon/sources/watch"
)

// Whose work each change in the workdir is: the agent's tool
// calls (its hooks' tool signals, its transcript's tool calls), the
// watcher's bursts, its checkpoints and its visits feed the workdir's
// ledger, shared by every agent on the workdir. Every call is nil-safe:
// without a ledger (no workdir) nothing is credited.

// attributing is the capture's side of the ledger: the ledger and the
// resolver of the paths tool calls name. nil when there is no ledger.
type attributing struct {
	ledger   *attribution.Ledger
	resolver *attribution.Resolver
}

// newAttributing prepares the ledger's feed for o; nil without a ledger or
// a workdir (or one the resolver refuses, which is logged).
func (c *Capture) newAttributing() *attributing {
	if c.o.Attribution == nil || c.o.Workdir == "" {
		return nil
	}
	r, err := attribution.NewResolver(c.o.Workdir)
	if err != nil {
		c.log.Warn("attribution is off: the workdir cannot be resolved", "err", err)
		return nil
	}
	return &attributing{ledger: c.o.Attribution, resolver: r}
}

// credited hands what a ledger call decided on: the conflicts it found go
// to Options.OnConflict (the daemon tells every agent they name).
func (c *Capture) credited(res attribution.Result, err error) {
	if err != nil {
		c.log.Debug("attribution: event not credited", "err", err)
		return
	}
	for _, w := range res.Expired {
		c.log.Warn("a shell tool call never ended (no PostToolUse, no Stop): its window closed at its bound, and later changes are not the agent's",
			"agent", w.Agent, "started", w.Start, "closed", w.End)
	}
	if c.o.OnConflict == nil {
		return
	}
	for _, cf := range res.Conflicts {
		c.o.OnConflict(cf)
	}
}

// relPaths maps the paths a tool call names onto the workdir, leaving out
// those the resolver refuses (outside the workdir, in .git, …).
func (a *attributing) relPaths(cwd string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if rel, err := a.resolver.Rel(cwd, p); err == nil {
			out = append(out, rel)
		}
	}
	return out
}

// toolSignal feeds a hook's tool call (a stored activity signal; its paths
// already passed the guard). Its time is the hook's when given, never later
// than when the daemon took it; the door it came through (agent.Signal)
// has already held it to the daemon's clock (at most ToolTimeSlack before
// its receipt; a spooled event's receipt is when it was spooled).
func (c *Capture) toolSignal(s *capsule.Signal) {
	a, t := c.attr, s.Tool
	if a == nil || t == nil {
		return
	}
	at := s.At
	if !t.At.IsZero() && (at.IsZero() || t.At.Before(at)) {
		at = t.At
	}
	if at.IsZero() {
		at = time.Now()
	}
	switch t.Kind {
	case capsule.ToolEdit:
		paths := a.relPaths(t.Cwd, t.Paths)
		if len(paths) == 0 {
			return
		}
		if snaps := c.snapshotter(); snaps != nil {
			// The turn's Stop may come before the watcher reports the
			// edit (it waits for the burst to go quiet): the snapshot at
			// Stop looks at the paths the tool named too.
			snaps.store.NoteChanged(paths)
		}
		c.credited(a.ledger.Tool(attribution.ToolEvent{Agent: c.o.Agent, Kind: attribution.KindEdit, Paths: paths, At: at}))
	case capsule.ToolShellStart:
		c.credited(a.ledger.ShellStart(c.o.Agent, shellID(t.ID), at))
	case capsule.ToolShellEnd:
		c.credited(a.ledger.ShellEnd(c.o.Agent, shellID(t.ID), at))
	}
}

// sessionStopped closes the agent's shell windows still open at at: it
// stopped (Stop) or its session ended, so a shell call whose PostToolUse
// never came (interrupted) ended by then.
func (c *Capture) sessionStopped(s *capsule.Signal) {
	if c.attr == nil || s.Kind != capsule.SignalSession || (s.Event != "end" && s.Event != "stop") {
		return
	}
	at := s.At
	if at.IsZero() {
		at = time.Now()
	}
	for _, w := range c.attr.ledger.EndShells(c.o.Agent, at) {
		c.log.Info("a shell tool call without its end closed at the agent's "+s.Event, "agent", w.Agent, "started", w.Start, "closed", w.End)
	}
}

// shellID pairs a shell's start with its end; a hook without a
// tool_use_id pairs with the agent's last one.
func shellID(id string) string {
	if id == "" {
		return "hook"
	}
	return "hook:" + id
}

// burst feeds what the watcher saw: the paths it names (secret-redacted,
// like every path the ledger holds), at the time of the burst's last
// change. Every agent on the workdir is told the same burst by the shared
// watcher, and each reports it: the ledger credits it once by its key
// (when it was first and last seen, and how many paths), so the changes
// are credited whichever agents are running. A removed directory (a path
// ending in "/") is left out: its files are what an agent's tools name.
func (c *Capture) burst(s watch.Summary) {
	a := c.attr
	if a == nil || len(s.Paths) == 0 {
		return
	}
	paths := make([]string, 0, len(s.Paths))
	for _, p := range s.Paths {
		if p == "" || strings.HasSuffix(p, "/") {
			continue
		}
		paths = append(paths, c.guard.Redact(p))
	}
	at := s.Last
	if at.IsZero() {
		at = time.Now()
	}
	key := fmt.Sprintf("%d-%d-%d", s.First.UnixNano(), s.Last.UnixNano(), s.Count)
	c.credited(a.ledger.Burst(attribution.Burst{Paths: paths, At: at, Key: key}))
}

// transcriptTools feeds the tool calls a transcript line completed (read
// while followed, not its history): edits as KindTranscript claims, shell
// runs as windows. cwd is the session's (relative paths are read from it).
func (c *Capture) transcriptTools(calls *transcript.ToolCalls, cwd string) {
	a := c.attr
	if a == nil || calls == nil {
		return
	}
	now := time.Now()
	for _, e := range calls.Edits {
		ps := make([]string, 0, len(e.Paths))
		for _, p := range e.Paths {
			ps = append(ps, c.guard.Redact(p))
		}
		paths := a.relPaths(cwd, ps)
		if len(paths) == 0 {
			continue
		}
		at := e.At
		if at.IsZero() || at.After(now) {
			at = now
		}
		c.credited(a.ledger.Tool(attribution.ToolEvent{Agent: c.o.Agent, Kind: attribution.KindTranscript, Paths: paths, At: at}))
	}
	for _, s := range calls.Shells {
		if s.Start.IsZero() || s.End.IsZero() {
			continue
		}
		id := "transcript:" + strconv.FormatInt(s.Start.UnixNano(), 10)
		c.credited(a.ledger.ShellStart(c.o.Agent, id, s.Start))
		c.credited(a.ledger.ShellEnd(c.o.Agent, id, s.End))
	}
}

// Checkpointed tells the ledger the agent checkpointed at at: its paths
// until then are no longer open work, and conflicts on them end.
func (c *Capture) Checkpointed(at time.Time) {
	if c == nil || c.attr == nil {
		return
	}
	c.attr.ledger.Checkpoint(c.o.Agent, at)
}

// Visited tells the ledger the agent received a resume at at:
// since_last_visit's by_others start over from there.
func (c *Capture) Visited(at time.Time) {
	if c == nil || c.attr == nil {
		return
	}
	c.attr.ledger.Visit(c.o.Agent, at)
}

// ByOthers lists the paths another agent or someone outside changed since
// the agent's last visit (nil without a ledger).
func (c *Capture) ByOthers() []attribution.ByOther {
	if c == nil || c.attr == nil {
		return nil
	}
	return c.attr.ledger.ByOthers(c.o.Agent)
}

// Conflicts lists the paths the agent and another agent both changed,
// neither having checkpointed past them (nil without a ledger).
func (c *Capture) Conflicts() []attribution.Conflict {
	if c == nil || c.attr == nil {
		return nil
	}
	return c.attr.ledger.Conflicts(c.o.Agent)
}

// AttributionLedger is the workdir's ledger when this capture feeds it and
// the workdir is watched (the watcher's changes are what it credits); nil
// otherwise (no workdir, not watched, or a workdir the resolver refused):
// the ledger then cannot say who changed what.
func (c *Capture) AttributionLedger() *attribution.Ledger {
	if c.attr == nil || !c.o.Watch.Enabled {
		return nil
	}
	return c.attr.ledger
}
