package attribution

import (
	"math/rand/v2"
	"testing"
	"time"
)

// randomEvent tells l one event drawn by r, by one of agents on one of
// paths at when: an edit or transcript claim, a shell's start or end, a
// burst (of one path or two), a checkpoint or a visit.
func randomEvent(t *testing.T, r *rand.Rand, l *Ledger, agents, paths []string, when time.Time) {
	t.Helper()
	agent, p := agents[r.IntN(len(agents))], paths[r.IntN(len(paths))]
	var err error
	switch r.IntN(8) {
	case 0:
		_, err = l.Tool(ToolEvent{Agent: agent, Kind: KindEdit, Paths: []string{p}, At: when})
	case 1:
		_, err = l.ShellStart(agent, "call", when)
	case 2:
		_, err = l.ShellEnd(agent, "call", when)
	case 3, 4:
		_, err = l.Burst(Burst{Paths: []string{p, paths[r.IntN(len(paths))]}, At: when})
	case 5:
		l.Checkpoint(agent, when.Add(-time.Duration(r.IntN(5))*time.Second))
	case 6:
		l.Visit(agent, when)
	case 7:
		_, err = l.Tool(ToolEvent{Agent: agent, Kind: KindTranscript, Paths: []string{p}, At: when.Add(-2 * time.Second)})
	}
	if err != nil {
		t.Fatal(err)
	}
}
