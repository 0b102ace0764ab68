package capture

import (
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// What resume says was done is checked against the work lost: a result
// the agent reported, or a plan step it completed, whose files have since
// vanished without a commit is marked with the loss, so that no resume
// claims work that exists nowhere.

// maxTurns bounds the prompt times kept: a done item older than the
// oldest is looked at over fallbackTurn instead.
const maxTurns = 64

// fallbackTurn is the turn assumed for a done item when no prompt before
// it is known (no hooks, or one from before the daemon started).
const fallbackTurn = time.Hour

// turnGrace is how long after a done item is reported the turn's edits
// may still count as its work: an agent may report before its last edit
// of the turn is seen.
const turnGrace = time.Minute

// turnStart is a turn's beginning: its prompt's time and session.
type turnStart struct {
	at      time.Time
	session string
}

// notePrompt keeps when a turn began (a prompt signal), and in which
// session.
func (c *Capture) notePrompt(s *capsule.Signal) {
	if s.Kind != capsule.SignalActivity || s.Event != "prompt" {
		return
	}
	at := s.At
	if at.IsZero() {
		at = time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prompts = append(c.prompts, turnStart{at: at, session: s.SessionID})
	if n := len(c.prompts) - maxTurns; n > 0 {
		c.prompts = slices.Delete(c.prompts, 0, n)
	}
}

// turnOf is the turn a done item reported at at belongs to: from the last
// prompt at or before it to turnGrace after it.
func (c *Capture) turnOf(at time.Time) (from, to time.Time) {
	from = at.Add(-fallbackTurn)
	c.mu.Lock()
	for _, p := range c.prompts {
		if !p.at.After(at) {
			from = p.at
		}
	}
	c.mu.Unlock()
	return from, at.Add(turnGrace)
}

// turnAt is the turn going on at at, by the prompts kept: the last
// begun at or before it; ok is false when none is known.
func (c *Capture) turnAt(at time.Time) (turnStart, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.prompts) - 1; i >= 0; i-- {
		if !c.prompts[i].at.After(at) {
			return c.prompts[i], true
		}
	}
	return turnStart{}, false
}

// LostDone is the loss (its work_lost id) that took the work of a done
// item reported at at: a loss found after at of a path this agent changed
// in that item's turn (the ledger's credit). "" when none did, or when
// the daemon cannot tell (no ledger of the workdir).
func (c *Capture) LostDone(at time.Time) string {
	ledger := c.AttributionLedger()
	if ledger == nil || at.IsZero() {
		return ""
	}
	c.lost.mu.Lock()
	losses := slices.Clone(c.lost.kept.Entries)
	c.lost.mu.Unlock()
	var after []capsule.WorkLost
	for _, l := range losses {
		if l.At.After(at) {
			after = append(after, l)
		}
	}
	if len(after) == 0 {
		return ""
	}
	from, to := c.turnOf(at)
	mine := map[string]bool{}
	for _, ch := range ledger.ChangesSince(from) {
		if ch.By == c.o.Agent && !ch.At.After(to) {
			mine[ch.Path] = true
		}
	}
	for _, l := range after {
		for _, p := range l.Paths {
			if mine[c.guard.Redact(p)] { // the ledger holds paths redacted
				return l.ID
			}
		}
	}
	return ""
}
