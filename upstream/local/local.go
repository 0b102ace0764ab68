// Package local is the `local` upstream: an archive, in each agent's state
// directory, of every accepted checkpoint, capsule and session end as JSON a
// person can read (`jq . archive/2026-11-30.jsonl`). It gives the embedded
// default somewhere to ship with no network and no account.
package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// Kind is this upstream's kind in the config.
const Kind = "local"

// ArchiveDir is the archive's directory name inside an agent's state
// directory.
const ArchiveDir = "archive"

// Archive appends each delivered write as one JSON line to
// <agent dir>/archive/<UTC day it was accepted>.jsonl. A write delivered
// twice (after a crash, before the acknowledgement) appears twice with the
// same seq and Idempotency-Key; ReadAll keeps one.
//
// One file per day rather than per write: creating a file is the costly
// part of a small write on most file systems, and a busy agent would pay it
// for every checkpoint.
type Archive struct {
	name     string
	agentDir func(agent string) string

	mu    sync.Mutex
	files map[string]*os.File // agent/day → open file, synced at Flush
	dirty map[string]bool     // agent → something appended since the last Flush
}

// New returns the archive upstream called name; agentDir maps an agent to
// its state directory.
func New(name string, agentDir func(agent string) string) *Archive {
	return &Archive{name: name, agentDir: agentDir, files: map[string]*os.File{}, dirty: map[string]bool{}}
}

// Name implements upstream.Upstream.
func (a *Archive) Name() string { return a.name }

// Kind implements upstream.Upstream.
func (a *Archive) Kind() string { return Kind }

// Accepts implements upstream.Upstream: the archive keeps everything.
func (a *Archive) Accepts(capsule.WriteKind) bool { return true }

// FileName is the archive file a write goes to.
func FileName(w capsule.Write) string {
	return w.At.UTC().Format("2006-01-02") + ".jsonl"
}

// Deliver implements upstream.Upstream. The line is appended but not
// synced: Flush makes a batch durable at once, and the outbox acknowledges
// nothing before it returns.
func (a *Archive) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := a.file(agent, FileName(w))
	if err != nil {
		return err
	}
	if _, err := f.Write(append(raw, '\n')); err != nil {
		return err
	}
	a.dirty[agent] = true
	return nil
}

// file returns the open archive file of agent for a day, opening (and, the
// first time, creating and naming durably) it when needed. a.mu is held.
func (a *Archive) file(agent, name string) (*os.File, error) {
	key := agent + "/" + name
	if f, ok := a.files[key]; ok {
		return f, nil
	}
	dir := filepath.Join(a.agentDir(agent), ArchiveDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := atomicfile.SyncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	// Keep at most today's and yesterday's files of an agent open.
	for k, old := range a.files {
		if strings.HasPrefix(k, agent+"/") && k < key && len(a.files) > 1 {
			old.Sync()
			old.Close()
			delete(a.files, k)
		}
	}
	a.files[key] = f
	return f, nil
}

// Flush implements upstream.Flusher: everything appended for agent since the
// last Flush reaches the disk.
func (a *Archive) Flush(ctx context.Context, agent string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.dirty[agent] {
		return nil
	}
	for k, f := range a.files {
		if strings.HasPrefix(k, agent+"/") {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("archive: %w", err)
			}
		}
	}
	delete(a.dirty, agent)
	return nil
}

// Close syncs and closes the open files (shutdown, reload).
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first error
	for k, f := range a.files {
		if err := f.Sync(); err != nil && first == nil {
			first = err
		}
		f.Close()
		delete(a.files, k)
	}
	return first
}

// ReadAll reads an agent's archive in sequence order, one entry per seq
// (tests, tools). A torn last line (a crash mid-append) is skipped: that
// write was never acknowledged and is delivered again.
func ReadAll(agentDir string) ([]capsule.Write, error) {
	paths, err := filepath.Glob(filepath.Join(agentDir, ArchiveDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		if _, err := os.Stat(filepath.Join(agentDir, ArchiveDir)); err != nil {
			return nil, err
		}
	}
	sort.Strings(paths)
	bySeq := map[uint64]capsule.Write{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			var w capsule.Write
			if json.Unmarshal(sc.Bytes(), &w) == nil && w.Seq > 0 {
				bySeq[w.Seq] = w
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	out := make([]capsule.Write, 0, len(bySeq))
	for _, w := range bySeq {
		out = append(out, w)
	}
	slices.SortFunc(out, func(x, y capsule.Write) int {
		switch {
		case x.Seq < y.Seq:
			return -1
		case x.Seq > y.Seq:
			return 1
		}
		return 0
	})
	return out, nil
}
