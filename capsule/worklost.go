package capsule

import (
	"fmt"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// MaxWorkLost bounds the work_lost entries a resume keeps (the oldest go
// first); MaxWorkLostPaths the paths one entry names.
const (
	MaxWorkLost      = 20
	MaxWorkLostPaths = 100
)

// WorkLost is uncommitted work a snapshot holds that vanished from the
// tree without a commit holding it (a `git checkout -- .`, `reset --hard`,
// `stash`, an `rm`), whoever did it: the paths, the snapshot that holds
// them and the one command that brings them back. Resume lists an entry
// until the agent checkpoints after it, or the work is back in the tree.
type WorkLost struct {
	// ID names the loss: `continuityd snapshot restore --lost ID` (POST
	// /v1/continuity/work_lost/{id}/restore) brings it back. Plain ASCII.
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Paths are the names lost, each in its exact form (termsafe.Exact: a
	// name that is not UTF-8 is quoted with C escapes, "\377.txt", so
	// that JSON carries it whole).
	Paths    []string `json:"paths"`
	Snapshot string   `json:"snapshot"`
	// Restore is the command that brings the paths back: by ID, so it
	// names no file and needs no quoting in any shell.
	Restore string `json:"restore"`
	// RestorePaths is the same restore with the snapshot and the paths
	// named (--path as termsafe.Name prints each, single-quoted), for a
	// person to read or adapt.
	RestorePaths string `json:"restore_paths,omitempty"`
	// Versions are, for the paths whose newest content the version
	// journal kept (newer than the snapshot's), that version: Restore
	// brings it back, not the snapshot's.
	Versions []LostVersion `json:"versions,omitempty"`
	// NotCovered says what the journal could not have captured before the
	// loss (a change inside its settle window, or while the daemon was
	// not watching) and for how long; "" never: it is always said.
	NotCovered string `json:"not_covered,omitempty"`
}

// LostVersion is the newest version of a lost path the version journal
// kept.
type LostVersion struct {
	Path    string    `json:"path"`
	Version string    `json:"version"` // history's id
	At      time.Time `json:"at"`
}

// workLostText is the markdown resume's first section: each loss, its
// paths and the command that brings them back, each in a code span of its
// own (CodeSpan: a name may hold backticks).
func (r *Resume) workLostText(now time.Time) string {
	var b strings.Builder
	for _, w := range r.WorkLost {
		shown := make([]string, 0, min(len(w.Paths), 10))
		for _, p := range w.Paths[:min(len(w.Paths), 10)] {
			shown = append(shown, CodeSpan(termsafe.ShowExact(p)))
		}
		more := ""
		if n := len(w.Paths) - len(shown); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		fmt.Fprintf(&b, "- %s: uncommitted %s %s%s vanished without a commit; bring %s back: %s\n",
			age(now, w.At), Plural(len(w.Paths), "change to", "changes to"), strings.Join(shown, ", "), more,
			Plural(len(w.Paths), "it", "them"), CodeSpan(termsafe.Line(w.Restore)))
		if len(w.Versions) > 0 {
			fmt.Fprintf(&b, "  (at the newest version the journal kept, %s)\n", age(now, w.Versions[len(w.Versions)-1].At))
		}
		if w.NotCovered != "" {
			fmt.Fprintf(&b, "  Not covered: %s\n", termsafe.Line(w.NotCovered))
		}
	}
	return b.String()
}

// CodeSpan is s as one markdown code span, whatever backticks it holds
// (CommonMark): fenced by a run of backticks longer than any in s, and
// padded with a space on each side when s begins or ends with a backtick
// or with a space (the renderer strips one space from each side). s must
// hold no line break.
func CodeSpan(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") ||
		strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ") && strings.Trim(s, " ") != "" {
		s = " " + s + " "
	}
	return fence + s + fence
}
