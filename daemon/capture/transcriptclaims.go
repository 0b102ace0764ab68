package capture

import (
	"path/filepath"
	"sync"
)

// TranscriptClaims says which agent on one workdir follows which
// transcript, so that one agent's tool calls, context usage and plan are
// never read as another's: every agent on the workdir shares it (the
// daemon keeps one per workdir), and each holds at most one transcript.
// A transcript a hook named (transcript_path) is bound to the hook's
// agent; one a follower picked by itself (the workdir's newest) is a
// guess, which gives way to a binding. A nil *TranscriptClaims is an agent
// alone on its workdir: every transcript is free. The zero value is ready.
type TranscriptClaims struct {
	mu   sync.Mutex
	held map[string]transcriptClaim // agent → the transcript it follows
	// lost wakes an agent's follower when its transcript was bound to
	// another agent (it must not block).
	lost map[string]func()
}

type transcriptClaim struct {
	path  string // cleaned
	bound bool   // named by the agent's hook, not guessed
}

// TakenFrom reports whether another agent than agent holds path.
func (t *TranscriptClaims) TakenFrom(agent, path string) bool {
	if t == nil {
		return false
	}
	path = filepath.Clean(path)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holder(path, agent) != ""
}

// holder is the agent other than but that holds path ("" : none).
func (t *TranscriptClaims) holder(path, but string) string {
	for a, c := range t.held {
		if a != but && c.path == path {
			return a
		}
	}
	return ""
}

// Guess records that agent follows path, picked by its follower; it
// reports false, and records nothing, when another agent holds path. A
// binding of agent's own to path stays a binding.
func (t *TranscriptClaims) Guess(agent, path string) bool {
	if t == nil {
		return true
	}
	path = filepath.Clean(path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holder(path, agent) != "" {
		return false
	}
	if c, ok := t.held[agent]; ok && c.path == path {
		return true
	}
	t.set(agent, transcriptClaim{path: path})
	return true
}

// BoundTo is the agent other than agent whose hook named path ("" : none).
func (t *TranscriptClaims) BoundTo(agent, path string) string {
	if t == nil {
		return ""
	}
	path = filepath.Clean(path)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.boundLocked(path, agent)
}

func (t *TranscriptClaims) boundLocked(path, but string) string {
	for a, c := range t.held {
		if a != but && c.path == path && c.bound {
			return a
		}
	}
	return ""
}

// Bind records that path is agent's (its hook named it): an agent that
// held it by guess lets go and its follower is woken to pick another. A
// transcript another agent's hook named first stays that agent's: Bind
// records nothing and returns that agent (one session's hooks speak for
// one agent, so a second agent naming it is mistaken or impersonating).
func (t *TranscriptClaims) Bind(agent, path string) (heldBy string) {
	if t == nil {
		return ""
	}
	path = filepath.Clean(path)
	t.mu.Lock()
	if holder := t.boundLocked(path, agent); holder != "" {
		t.mu.Unlock()
		return holder
	}
	var wake []func()
	for a, c := range t.held {
		if a != agent && c.path == path {
			delete(t.held, a)
			if f := t.lost[a]; f != nil {
				wake = append(wake, f)
			}
		}
	}
	t.set(agent, transcriptClaim{path: path, bound: true})
	t.mu.Unlock()
	for _, f := range wake {
		f()
	}
	return ""
}

func (t *TranscriptClaims) set(agent string, c transcriptClaim) {
	if t.held == nil {
		t.held = map[string]transcriptClaim{}
	}
	t.held[agent] = c
}

// Release forgets what agent follows (its follower stopped or dropped its
// transcript), so another agent may pick it.
func (t *TranscriptClaims) Release(agent string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, agent)
}

// listen registers what wakes agent's follower when its transcript is
// bound to another agent; nil forgets it.
func (t *TranscriptClaims) listen(agent string, wake func()) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if wake == nil {
		delete(t.lost, agent)
		return
	}
	if t.lost == nil {
		t.lost = map[string]func(){}
	}
	t.lost[agent] = wake
}
