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
	At       time.Time `json:"at"`
	Paths    []string  `json:"paths"`
	Snapshot string    `json:"snapshot"`
	// Restore is the command that brings the paths back from Snapshot
	// (shell-quoted; control characters in a name escaped, $'…').
	Restore string `json:"restore"`
}

// workLostText is the markdown resume's first section: each loss, its
// paths and the command that brings them back.
func (r *Resume) workLostText(now time.Time) string {
	var b strings.Builder
	for _, w := range r.WorkLost {
		shown := make([]string, 0, min(len(w.Paths), 10))
		for _, p := range w.Paths[:min(len(w.Paths), 10)] {
			shown = append(shown, termsafe.Name(p))
		}
		more := ""
		if n := len(w.Paths) - len(shown); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		fmt.Fprintf(&b, "- %s: uncommitted %s %s%s vanished without a commit; bring %s back: `%s`\n",
			age(now, w.At), Plural(len(w.Paths), "change to", "changes to"), strings.Join(shown, ", "), more,
			Plural(len(w.Paths), "it", "them"), termsafe.Text(w.Restore))
	}
	return b.String()
}
