package ui

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// tlRow is one line of a place's timeline: a snapshot, or what happened
// between snapshots (a checkpoint, a decision, a compaction, a session's
// start or end, a turn's prompt, work lost).
type tlRow struct {
	At      time.Time
	Kind    string // snapshot, checkpoint, decision, compaction, session, turn, lost
	Snap    *ops.Snapshot
	Text    string // shown through show: escaped and redacted
	Session string
	// Turn is the changes of the turn a turn_end snapshot ends (its diff
	// against the turn's turn_start snapshot): "" when none is known.
	Turn string
}

// feedWait bounds the read of the place's event feed: the wait operation
// answers at once when the feed holds events after the cursor, and would
// hold an empty feed's long poll for its full second; cut short, the
// answer is an empty one.
const feedWait = 250 * time.Millisecond

// feedNow is what the place's event feed holds now (its last 512 events,
// since the daemon started), through the wait operation as the session's
// user.
func (s *Server) feedNow(ctx context.Context, name string) []ops.Event {
	ctx, cancel := context.WithTimeout(ctx, feedWait)
	defer cancel()
	feed, err := call(ctx, s, ops.Wait, ops.Args{Query: agentQuery(name, "after", "0", "max_seconds", "1")})
	if err != nil {
		return nil
	}
	return feed.Events
}

// sessionOfEvent is the agent session a feed event belongs to ("" when it
// names none).
func sessionOfEvent(e ops.Event) string {
	if sig, ok := e.Data.(map[string]any); ok {
		id, _ := sig["session_id"].(string)
		return id
	}
	return ""
}

// eventRow is the timeline's line for a feed event, false for the events
// the timeline leaves to other views (context levels, file activity,
// upstream traffic).
func eventRow(e ops.Event) (tlRow, bool) {
	r := tlRow{At: e.At, Session: sessionOfEvent(e)}
	sig, _ := e.Data.(map[string]any)
	str := func(k string) string { v, _ := sig[k].(string); return v }
	switch e.Kind {
	case "checkpoint":
		r.Kind, r.Text = "checkpoint", e.Summary
	case "work_lost":
		r.Kind, r.Text = "lost", e.Summary
	case "signal":
		switch str("kind") {
		case capsule.SignalCompaction:
			r.Kind, r.Text = "compaction", "context compacted ("+str("trigger")+", "+str("phase")+")"
		case capsule.SignalSession:
			r.Kind = "session"
			switch str("event") {
			case "start":
				r.Text = "session started (" + str("source") + ")"
			case "end":
				r.Text = "session ended (" + str("reason") + ")"
			case "stop":
				r.Kind, r.Text = "turn", "the agent's turn ended"
			default:
				return r, false
			}
		case capsule.SignalActivity:
			if str("event") != "prompt" {
				return r, false
			}
			r.Kind, r.Text = "turn", "a new message: the agent's turn began"
		default:
			return r, false
		}
	default:
		return r, false
	}
	return r, true
}

// turnStarts maps each turn_end snapshot of list (newest first) to the
// turn_start snapshot its turn began from: the nearest older turn_start
// of the same session.
func turnStarts(list []ops.Snapshot) map[string]string {
	out := map[string]string{}
	open := map[string][]string{} // session → turn_end ids waiting for their start
	for _, sn := range list {
		sess := ""
		if sn.Conversation != nil {
			sess = sn.Conversation.Session
		}
		switch sn.Trigger {
		case "turn_end":
			open[sess] = append(open[sess], sn.ID)
		case "turn_start":
			for _, end := range open[sess] {
				out[end] = sn.ID
			}
			delete(open, sess)
		}
	}
	return out
}

// sinceLastMessage is the changes since the agent was last given a
// message: the newest turn_start snapshot against the newest snapshot
// ("" when there is no turn, or nothing since).
func sinceLastMessage(agent string, list []ops.Snapshot) string {
	for i, sn := range list {
		if sn.Trigger == "turn_start" {
			if i == 0 {
				return ""
			}
			return "/ui/a/" + url.PathEscape(agent) + "/s/" + url.PathEscape(list[0].ID) + "?against=" + url.QueryEscape(sn.ID)
		}
	}
	return ""
}

// timelineRows lays the page's snapshots (newest first) and the events
// of their time together, newest first: the events newer than the page's
// newest snapshot go on the first page only, those older than its oldest
// on the last page only. With a session, only that session's events and
// those that name none (checkpoints, decisions) are kept.
func timelineRows(agent string, page []ops.Snapshot, turns map[string]string, first, last bool, session string, evs []ops.Event, decisions []capsule.DecisionRecord) []tlRow {
	var rows []tlRow
	for i := range page {
		sn := &page[i]
		r := tlRow{At: sn.Time, Kind: "snapshot", Snap: sn}
		if sn.Conversation != nil {
			r.Session = sn.Conversation.Session
		}
		if start, ok := turns[sn.ID]; ok {
			r.Turn = "/ui/a/" + url.PathEscape(agent) + "/s/" + url.PathEscape(sn.ID) + "?against=" + url.QueryEscape(start)
		}
		rows = append(rows, r)
	}
	var newest, oldest time.Time
	if len(page) > 0 {
		newest, oldest = page[0].Time, page[len(page)-1].Time
	}
	inPage := func(t time.Time) bool {
		if len(page) == 0 {
			return true
		}
		return (first || !t.After(newest)) && (last || !t.Before(oldest))
	}
	for _, e := range evs {
		r, ok := eventRow(e)
		if !ok || !inPage(r.At) || (session != "" && r.Session != "" && r.Session != session) {
			continue
		}
		rows = append(rows, r)
	}
	for _, d := range decisions {
		if !inPage(d.At) {
			continue
		}
		rows = append(rows, tlRow{At: d.At, Kind: "decision", Text: fmt.Sprintf("decided: %s, because %s", d.Chosen, d.Because)})
	}
	slices.SortStableFunc(rows, func(a, b tlRow) int { return b.At.Compare(a.At) })
	return rows
}
