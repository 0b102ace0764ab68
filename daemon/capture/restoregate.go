package capture

import (
	"slices"
	"sync"
)

// RestoreGate is shared by the captures of every agent on one workdir: a
// restore by any of them changes the tree they all snapshot, so none of
// them may take it for lost work. The zero value is ready.
type RestoreGate struct {
	mu      sync.Mutex
	members []*Capture // in the order they joined: the order their checks are held
}

func (g *RestoreGate) join(c *Capture) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = append(g.members, c)
}

func (g *RestoreGate) leave(c *Capture) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = slices.DeleteFunc(g.members, func(m *Capture) bool { return m == c })
}

// sharing are the captures a restore by c must hold and tell: every one on
// its workdir (c alone without a gate), in one order for every caller.
func (c *Capture) sharing() []*Capture {
	g := c.o.RestoreGate
	if g == nil {
		return []*Capture{c}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.members, c) {
		return append(slices.Clone(g.members), c)
	}
	return slices.Clone(g.members)
}
