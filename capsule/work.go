package capsule

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// WriteWork is an automatic "work" record: what the agent's work tree and
// repository did since the last one (a work snapshot's id, the files it
// changed with line counts, the commits), written by the checkpoint policy
// through the same store and outbox as the agent's own writes. The local
// archive keeps it whole; Q-Day gets only the Write's Checkpoint (a private
// working_state summary, when the agent did not describe the work itself);
// Delx gets the receipt the record adds, in the next capsule.
const WriteWork WriteKind = "work"

// Bounds of a work record: what a runaway tree can put into the log.
const (
	MaxWorkFiles    = 200 // files listed; FilesMore counts the rest
	MaxWorkCommits  = 20  // commits listed, newest kept
	MaxWorkSkipped  = 50  // skipped files listed
	MaxWorkWithheld = 50  // files withheld from the fleet listed
)

// Work is what an automatic checkpoint carries of the work itself.
type Work struct {
	Trigger      string        `json:"trigger"`
	Snapshot     *WorkSnapshot `json:"snapshot,omitempty"`
	Files        []WorkFile    `json:"files"`
	FilesMore    int           `json:"files_more,omitempty"`
	Commits      []string      `json:"commits"` // receipts "<repo>@<sha> <subject>" since the last record
	UsedFraction *float64      `json:"context_used_fraction"`
	Plan         []PlanStep    `json:"plan"`
}

// WorkSnapshot is the work snapshot a record belongs to.
type WorkSnapshot struct {
	ID       string    `json:"id"`
	Parent   string    `json:"parent,omitempty"`
	At       time.Time `json:"at"`
	Seq      uint64    `json:"seq"` // the residency seq the snapshot belongs to
	Added    int       `json:"added"`
	Modified int       `json:"modified"`
	Deleted  int       `json:"deleted"`
	// Skipped names files the snapshot left out (too large, unreadable, a
	// nested repository); SkippedCount is how many in all.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedCount int      `json:"skipped_count,omitempty"`
	// Withheld names files the snapshot's copy in the fleet leaves out
	// (credentials: they never leave the machine), with the reason;
	// WithheldCount is how many in all.
	Withheld      []WorkWithheld `json:"withheld,omitempty"`
	WithheldCount int            `json:"withheld_count,omitempty"`
	// Conversation is the point of the agent's conversation the snapshot
	// matches (its session and last message id), when a transcript was
	// followed.
	Conversation *WorkConversation `json:"conversation,omitempty"`
}

// WorkConversation names a point of the agent's conversation: the
// session and the id of its last message then (Claude Code's entry uuid,
// Codex's item id).
type WorkConversation struct {
	Session string `json:"session,omitempty"`
	Message string `json:"message,omitempty"`
}

// WorkWithheld is a file kept off the fleet, and why.
type WorkWithheld struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// WorkFile is one file the work changed, with its line counts.
type WorkFile struct {
	Path         string `json:"path"`
	Status       string `json:"status"` // added, modified, deleted
	LinesAdded   int    `json:"lines_added"`
	LinesDeleted int    `json:"lines_deleted"`
	Binary       bool   `json:"binary,omitempty"`
	// By is whose change the file is, as the agent sees it: "agent" (its
	// own tool calls), "agent:NAME" (another agent of the daemon) or
	// "outside" (nobody claimed it); "" when the daemon cannot tell.
	By string `json:"by,omitempty"`
}

// Lines sums the line counts of the files listed.
func (w *Work) Lines() (added, deleted int) {
	for _, f := range w.Files {
		added += f.LinesAdded
		deleted += f.LinesDeleted
	}
	return added, deleted
}

// FileCount is the number of files the work changed.
func (w *Work) FileCount() int {
	if w.Snapshot != nil {
		return w.Snapshot.Added + w.Snapshot.Modified + w.Snapshot.Deleted
	}
	return len(w.Files) + w.FilesMore
}

// maxSummary bounds Summary (runes); Q-Day's last_result takes 4000.
const maxSummary = 500

// Summary is the one line a work record gives people and Q-Day's private
// working_state.last_result: "3 files changed (+120 −8); commit a1b2c3d
// teach the tokenizer". Control characters are replaced, so it always
// passes the working-state guard.
func (w *Work) Summary() string {
	var parts []string
	if n := w.FileCount(); n > 0 {
		a, d := w.Lines()
		parts = append(parts, fmt.Sprintf("%d %s changed (+%d −%d)", n, Plural(n, "file", "files"), a, d))
	}
	switch n := len(w.Commits); {
	case n == 1:
		parts = append(parts, "commit "+commitText(w.Commits[0]))
	case n > 1:
		parts = append(parts, fmt.Sprintf("%d commits, last %s", n, commitText(w.Commits[n-1])))
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return clean(strings.Join(parts, "; "), maxSummary)
}

// Receipt is the receipt a work record adds (it reaches Delx in the next
// capsule): the snapshot and the counts, no file names.
func (w *Work) Receipt() string {
	s := w.Summary()
	if w.Snapshot != nil {
		s = "snapshot " + shortID(w.Snapshot.ID) + " (" + w.Trigger + "): " + s
	}
	return clean(s, 500)
}

// commitText is a commit receipt without its repository: "<sha> <subject>".
func commitText(receipt string) string {
	if at := strings.Index(receipt, "@"); at >= 0 && !strings.Contains(receipt[:at], " ") {
		return receipt[at+1:]
	}
	return receipt
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Plural is one for n == 1, else many: text for a person says "1 write",
// "2 writes".
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clean replaces control characters with a space and cuts s to max runes.
func clean(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// SnapshotRef is the latest work snapshot as resume shows it.
type SnapshotRef struct {
	ID      string    `json:"id"`
	At      time.Time `json:"at"`
	Trigger string    `json:"trigger"`
	Files   int       `json:"files"` // files changed against its parent
}
