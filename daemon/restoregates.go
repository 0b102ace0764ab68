package daemon

import (
	"path/filepath"
	"sync"

	"github.com/continuityd/continuityd/daemon/capture"
)

// workdirGates holds one capture.RestoreGate per workdir, shared by every
// agent on it for as long as the daemon runs.
type workdirGates struct {
	mu sync.Mutex
	m  map[string]*capture.RestoreGate
}

// For is the gate of workdir (nil: the agent has no workdir).
func (g *workdirGates) For(workdir string) *capture.RestoreGate {
	if workdir == "" {
		return nil
	}
	key := filepath.Clean(workdir)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]*capture.RestoreGate{}
	}
	if gate, ok := g.m[key]; ok {
		return gate
	}
	gate := &capture.RestoreGate{}
	g.m[key] = gate
	return gate
}
