package capsule

import (
	"fmt"
	"time"
)

// RestoreInterrupted is a restore of the work tree that a kill, a crash or
// a full disk interrupted: the daemon finishes it at its next start and
// says so in resume and status, with the snapshot of the tree before it
// and the command that undoes it, until a restore succeeds after it (or
// for a week).
type RestoreInterrupted struct {
	Snapshot string `json:"snapshot"` // the snapshot it restored
	// Safety is the snapshot of the tree before the restore: Undo restores
	// it.
	Safety string    `json:"safety"`
	Began  time.Time `json:"began"`
	// Found is when the daemon found it interrupted: its next start, or
	// the failure that stopped it.
	Found time.Time `json:"found"`
	Files int       `json:"files"` // the files it was to change
	Done  int       `json:"done"`  // of them, known done when it stopped (at least)
	// Finished is set once the daemon finished it; FinishSafety is then the
	// snapshot of the tree as the finish found it (what changed after the
	// interruption is there).
	Finished     bool   `json:"finished"`
	FinishSafety string `json:"finish_safety,omitempty"`
	// Problem says why it is not finished (yet).
	Problem string `json:"problem,omitempty"`
	// Undo is the command that undoes the restore (its safety snapshot,
	// the whole tree or the paths the restore was limited to).
	Undo string `json:"undo,omitempty"`
}

// Summary is the interruption in one paragraph, for the markdown resume
// and `continuityd status`.
func (r *RestoreInterrupted) Summary(now time.Time) string {
	what := fmt.Sprintf("a restore of snapshot %s (%d %s) was interrupted (a kill, a crash or a full disk) with at least %d done, %s",
		short12(r.Snapshot), r.Files, Plural(r.Files, "file", "files"), r.Done, age(now, r.Found))
	state := "; the daemon finished it when it started again"
	if r.FinishSafety != "" {
		state += fmt.Sprintf(" (the tree as it found it then is snapshot %s)", short12(r.FinishSafety))
	}
	if !r.Finished {
		state = "; it is not finished: " + r.Problem
	}
	undo := ""
	if r.Safety != "" {
		undo = fmt.Sprintf(". The tree before it is snapshot %s", short12(r.Safety))
		if r.Undo != "" {
			undo += "; undo it with `" + r.Undo + "`"
		}
	}
	return what + state + undo + "\n"
}

// short12 is a snapshot id as people see it.
func short12(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
