package ops

import (
	"fmt"
	"time"
)

// LogAnswer is the answer to GET /v1/log (`continuityd log`): the agent's
// work, one entry per snapshot of its work tree, newest first.
type LogAnswer struct {
	Agent   string     `json:"agent"`
	Entries []LogEntry `json:"entries"`
}

// LogEntry is one snapshot in the log: when, why, how many files, whose
// work, and where the conversation stood. The context used at that time is
// not recorded with a snapshot, so the log has none to show.
type LogEntry struct {
	Time     time.Time `json:"at"`
	Trigger  string    `json:"trigger"`
	Snapshot string    `json:"snapshot"` // its id, for snapshot show, diff or restore
	Seq      uint64    `json:"seq"`      // the residency seq it belongs to
	Added    int       `json:"added"`
	Modified int       `json:"modified"`
	Deleted  int       `json:"deleted"`
	// Who is whose work the snapshot holds: the agent it was taken for.
	Who string `json:"who"`
	// Session and Message are where the agent's conversation stood, as
	// its transcript names them ("" when none was followed).
	Session string `json:"session,omitempty"`
	Message string `json:"message,omitempty"`
}

// Lines are the log as `continuityd log` prints it, one line per entry,
// newest first: time, trigger, files, who, seq, snapshot, session/message.
// The CLI makes each line safe for a terminal.
func (l LogAnswer) Lines() []string {
	if len(l.Entries) == 0 {
		return []string{"no snapshots yet for agent " + l.Agent}
	}
	out := make([]string, 0, len(l.Entries))
	for _, e := range l.Entries {
		line := fmt.Sprintf("%s  %-10s  +%d ~%d -%d  %s  seq %d  %s", e.Time.Local().Format("2006-01-02 15:04:05"),
			e.Trigger, e.Added, e.Modified, e.Deleted, e.Who, e.Seq, shortID(e.Snapshot))
		if e.Session != "" {
			line += "  session " + shortID(e.Session)
			if e.Message != "" {
				line += "/" + shortID(e.Message)
			}
		}
		out = append(out, line)
	}
	return out
}

// shortID is an id as people read it: its first 12 characters.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
