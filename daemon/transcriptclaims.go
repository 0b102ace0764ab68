package daemon

import (
	"sync"

	"github.com/continuityd/continuityd/daemon/capture"
)

// workdirTranscripts holds one capture.TranscriptClaims per workdir,
// shared by every agent on it for as long as the daemon runs: which agent
// follows which transcript, so that two agents on one workdir (a Claude
// Code and a Codex session, or two of one kind) never follow the same one
// and one's tool calls are never credited to the other.
type workdirTranscripts struct {
	mu sync.Mutex
	m  map[string]*capture.TranscriptClaims
}

// For is the claims of workdir (nil: the agent has no workdir).
func (w *workdirTranscripts) For(workdir string) *capture.TranscriptClaims {
	if workdir == "" {
		return nil
	}
	key := workdirKey(workdir)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*capture.TranscriptClaims{}
	}
	if c, ok := w.m[key]; ok {
		return c
	}
	c := &capture.TranscriptClaims{}
	w.m[key] = c
	return c
}
