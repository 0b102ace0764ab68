package daemon

import (
	"path/filepath"
	"sync"

	"github.com/continuityd/continuityd/daemon/capture"
)

// perWorkdir holds one *T per workdir, shared by every agent of the daemon
// on that workdir for as long as the daemon runs: what agents on one tree
// must share (a restore gate, the transcripts they follow, the watcher)
// is made once, on first use, by fresh (a zero T when fresh is nil).
type perWorkdir[T any] struct {
	mu    sync.Mutex
	m     map[string]*T
	fresh func(key string) *T
}

// For is workdir's value (nil: the agent has no workdir).
func (p *perWorkdir[T]) For(workdir string) *T {
	if workdir == "" {
		return nil
	}
	key := workdirKey(workdir)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*T{}
	}
	if v, ok := p.m[key]; ok {
		return v
	}
	v := new(T)
	if p.fresh != nil {
		v = p.fresh(key)
	}
	p.m[key] = v
	return v
}

// each calls f with every value held, under the lock (f must not call For).
func (p *perWorkdir[T]) each(f func(*T)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.m {
		f(v)
	}
}

// workdirGates: a restore by one agent is no lost work for the others on
// its workdir (capture.RestoreGate).
type workdirGates = perWorkdir[capture.RestoreGate]

// workdirTranscripts: which agent on a workdir follows which transcript,
// so that two agents on one workdir (a Claude Code and a Codex session, or
// two of one kind) never follow the same one and one's tool calls are
// never credited to the other (capture.TranscriptClaims).
type workdirTranscripts = perWorkdir[capture.TranscriptClaims]

// workdirKey is a workdir as the agents on it are matched: two spellings
// of one path are one workdir.
func workdirKey(workdir string) string { return filepath.Clean(workdir) }
