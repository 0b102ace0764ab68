package daemon

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/continuityd/continuityd/daemon/attribution"
)

// workdirLedgers holds one attribution ledger per workdir: every agent of
// the daemon that shares a workdir shares its ledger, so a change is
// credited once and each agent sees the others' claims. A ledger lives as
// long as the daemon (a reload that keeps the workdir keeps what it
// learnt). It also knows who to tell of a conflict: each agent on the
// workdir registers where its conflicts go (listen).
type workdirLedgers struct {
	mu        sync.Mutex
	m         map[string]*attribution.Ledger
	listeners map[string]map[string]func(attribution.Conflict) // workdir → agent → its feed
	// conflicts counts the conflicts found (a metric; nil in tests).
	conflicts prometheus.Counter
}

func workdirKey(workdir string) string { return filepath.Clean(workdir) }

// For is the ledger of workdir ("" : none, the agent has no workdir).
func (l *workdirLedgers) For(workdir string) *attribution.Ledger {
	if workdir == "" {
		return nil
	}
	key := workdirKey(workdir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*attribution.Ledger{}
	}
	if lg, ok := l.m[key]; ok {
		return lg
	}
	lg := attribution.New(attribution.Options{Since: time.Now()})
	l.m[key] = lg
	return lg
}

// listen registers where agent's conflicts on workdir go (its wait feed),
// in place of what it registered before (a reopened agent); tell nil
// forgets it (a stopped one).
func (l *workdirLedgers) listen(workdir, agent string, tell func(attribution.Conflict)) {
	if workdir == "" {
		return
	}
	key := workdirKey(workdir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if tell == nil {
		delete(l.listeners[key], agent)
		return
	}
	if l.listeners == nil {
		l.listeners = map[string]map[string]func(attribution.Conflict){}
	}
	if l.listeners[key] == nil {
		l.listeners[key] = map[string]func(attribution.Conflict){}
	}
	l.listeners[key][agent] = tell
}

// teller is what an agent's capture on workdir calls with the conflicts
// it finds: every agent the conflict names is told, once, whichever
// agent's event revealed it.
func (l *workdirLedgers) teller(workdir string) func(attribution.Conflict) {
	key := workdirKey(workdir)
	return func(c attribution.Conflict) {
		if l.conflicts != nil {
			l.conflicts.Inc()
		}
		l.mu.Lock()
		var tell []func(attribution.Conflict)
		for _, name := range c.Agents {
			if f := l.listeners[key][name]; f != nil {
				tell = append(tell, f)
			}
		}
		l.mu.Unlock()
		for _, f := range tell {
			f(c)
		}
	}
}
