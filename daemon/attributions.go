package daemon

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
)

// workdirLedgers holds one attribution ledger per workdir: every agent of
// the daemon that shares a workdir shares its ledger, so a change is
// credited once and each agent sees the others' claims. A ledger lives as
// long as the daemon (a reload that keeps the workdir keeps what it
// learnt).
type workdirLedgers struct {
	mu sync.Mutex
	m  map[string]*attribution.Ledger
}

// For is the ledger of workdir ("" : none, the agent has no workdir).
func (l *workdirLedgers) For(workdir string) *attribution.Ledger {
	if workdir == "" {
		return nil
	}
	key := filepath.Clean(workdir)
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
