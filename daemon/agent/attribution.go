package agent

import (
	"fmt"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// Who changed what in a shared workdir: the resume's
// since_last_visit.by_others and conflicts come from the workdir's
// attribution ledger, which the agent's capture feeds.

// TellConflict puts a conflict on the agent's wait feed: a path it and
// another agent changed. The daemon calls it for every agent the conflict
// names, whichever agent's event revealed it.
func (a *Agent) TellConflict(c attribution.Conflict) {
	var others []string
	for _, name := range c.Agents {
		if name != a.name {
			others = append(others, name)
		}
	}
	a.feed.Publish(events.Event{Kind: "conflict",
		Summary: fmt.Sprintf("%s was changed by you and by %s: check it before you go on", termsafe.Name(c.Path), strings.Join(others, " and ")),
		Data:    capsule.PathConflict{Path: c.Path, Agents: c.Agents, At: c.At}})
}
