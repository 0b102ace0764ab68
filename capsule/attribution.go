package capsule

import (
	"fmt"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// Who changed what in a shared workdir (interface.md, "Who changed
// what"). The daemon's attribution ledger fills these at read time.

// ByOther is a path someone other than the agent changed since its last
// visit: By is "agent:NAME" (another agent of this daemon) or "outside"
// (nobody claimed it: a person, an editor, another program).
type ByOther struct {
	Path string `json:"path"`
	By   string `json:"by"`
}

// PathConflict is a path this agent and another changed, neither having
// checkpointed past it since. Agents are their names, sorted, this one
// included.
type PathConflict struct {
	Path   string    `json:"path"`
	Agents []string  `json:"agents"`
	At     time.Time `json:"at"` // the latest of their changes
}

// maxMarkdownAttribution bounds the paths the markdown lists per line.
const maxMarkdownAttribution = 10

// conflictsText is the markdown's line about conflicts: first, as it asks
// the agent to look before it goes on.
func (r *Resume) conflictsText() string {
	if len(r.Conflicts) == 0 {
		return ""
	}
	var b strings.Builder
	for _, c := range lastN(r.Conflicts, maxMarkdownAttribution) {
		fmt.Fprintf(&b, "- %s changed by %s; check it before you go on, and checkpoint once settled\n",
			termsafe.Name(c.Path), strings.Join(c.Agents, " and "))
	}
	if n := len(r.Conflicts) - maxMarkdownAttribution; n > 0 {
		fmt.Fprintf(&b, "- and %d more (`continuityd resume --json`)\n", n)
	}
	return b.String()
}

// byOthersText is since-last-visit's line of what others changed.
func (r *Resume) byOthersText() string {
	bo := r.SinceLastVisit.ByOthers
	if len(bo) == 0 {
		return ""
	}
	shown := make([]string, 0, maxMarkdownAttribution)
	for _, o := range lastN(bo, maxMarkdownAttribution) {
		shown = append(shown, termsafe.Name(o.Path)+" ("+termsafe.Name(o.By)+")")
	}
	more := ""
	if n := len(bo) - len(shown); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("- changed by others: %s%s\n", strings.Join(shown, ", "), more)
}
