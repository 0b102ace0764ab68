// Package local is the `local` upstream: an archive, in each agent's state
// directory, of every accepted checkpoint and capsule as a JSON file a person
// can read. It gives the embedded default somewhere to ship with no network
// and no account.
package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/atomicfile"
)

// Kind is this upstream's kind in the config.
const Kind = "local"

// ArchiveDir is the archive's directory name inside an agent's state
// directory.
const ArchiveDir = "archive"

// Archive writes each delivered write to
// <agent dir>/archive/<seq, 20 digits>-<kind>.json, atomically; delivering
// the same write twice rewrites the same file.
type Archive struct {
	name     string
	agentDir func(agent string) string

	mu       sync.Mutex
	unsynced map[string][]*os.File // agent → files written since the last Flush, still open
}

// New returns the archive upstream called name; agentDir maps an agent to
// its state directory.
func New(name string, agentDir func(agent string) string) *Archive {
	return &Archive{name: name, agentDir: agentDir, unsynced: map[string][]*os.File{}}
}

// Name implements upstream.Upstream.
func (a *Archive) Name() string { return a.name }

// Kind implements upstream.Upstream.
func (a *Archive) Kind() string { return Kind }

// Accepts implements upstream.Upstream: the archive keeps everything.
func (a *Archive) Accepts(capsule.WriteKind) bool { return true }

// Deliver implements upstream.Upstream.
func (a *Archive) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	dir := filepath.Join(a.agentDir(agent), ArchiveDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return err
	}
	// Written in place and kept open, not synced: Flush syncs the batch at
	// once (the outbox acknowledges only after it), so a busy agent costs
	// the disk one journal commit per batch. A file cut short by a crash is
	// rewritten whole by the redelivery that follows, under the same name.
	f, err := os.OpenFile(filepath.Join(dir, FileName(w)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(raw, '\n')); err != nil {
		f.Close()
		return err
	}
	a.mu.Lock()
	a.unsynced[agent] = append(a.unsynced[agent], f)
	a.mu.Unlock()
	return nil
}

// Flush implements upstream.Flusher: the files delivered since the last
// Flush, then the directory that names them, reach the disk. Until it
// returns nil, nothing delivered since is acknowledged (and the outbox
// delivers the batch again).
func (a *Archive) Flush(ctx context.Context, agent string) error {
	a.mu.Lock()
	files := a.unsynced[agent]
	delete(a.unsynced, agent)
	a.mu.Unlock()
	var first error
	for _, f := range files {
		if err := f.Sync(); err != nil && first == nil {
			first = err
		}
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return atomicfile.SyncDir(filepath.Join(a.agentDir(agent), ArchiveDir))
}

// Close closes files delivered but never flushed (shutdown); they are
// delivered again at the next start.
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for agent, files := range a.unsynced {
		for _, f := range files {
			f.Close()
		}
		delete(a.unsynced, agent)
	}
	return nil
}

// FileName is the archive file name of a write.
func FileName(w capsule.Write) string {
	return fmt.Sprintf("%020d-%s.json", w.Seq, w.Kind)
}

// ReadAll reads an agent's archive in sequence order (tests, tools).
func ReadAll(agentDir string) ([]capsule.Write, error) {
	entries, err := os.ReadDir(filepath.Join(agentDir, ArchiveDir))
	if err != nil {
		return nil, err
	}
	var out []capsule.Write
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" || e.Name()[0] == '.' {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(agentDir, ArchiveDir, e.Name()))
		if err != nil {
			return nil, err
		}
		var w capsule.Write
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, w)
	}
	return out, nil
}
