// Package baseline holds what the benchmarks measure continuityd beside,
// in the same run: the physical baselines (a bare group commit, the
// process's CPU clock), that is what this machine allows before any of
// continuityd's own work, and the medians and rounds the figures are
// quoted with. It is used by tests only.
package baseline

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/continuityd/continuityd/internal/atomicfile"
)

// GroupCommit is the textbook group commit with nothing of continuityd in
// it: Write appends a record to a preallocated file and returns once an
// fdatasync covers it. Like the residency, a writer that finds no commit
// in progress commits itself (a lone writer pays no hand-off); writers that
// arrive during a commit queue for one committer goroutine, which writes
// and syncs everything queued at once.
type GroupCommit struct {
	f     *os.File
	queue chan *pending
	quit  chan struct{}
	done  chan struct{}

	size     int64      // of the preallocated file; writing wraps around at its end
	commitMu sync.Mutex // held by whoever writes and syncs
	off      int64      // guarded by commitMu

	commits, writes atomic.Int64
}

type pending struct {
	p    []byte
	done chan error
}

// FileSize is the preallocated log the benchmarks use: larger than any
// run writes, so a sync never waits for the file to grow.
const FileSize = 64 << 20

// maxWriters bounds the writers that may wait at once without blocking
// on the queue (far beyond any benchmark's).
const maxWriters = 1024

// OpenGroupCommit creates dir/name, preallocated to size bytes and synced
// as the residency's log is (so a sync writes data blocks only), and starts
// the committer. Close stops it.
func OpenGroupCommit(dir, name string, size int64) (*GroupCommit, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err = f.WriteAt(make([]byte, size), 0); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	g := &GroupCommit{f: f, size: size, queue: make(chan *pending, maxWriters), quit: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g, nil
}

// Close stops the committer (writers still queued get ErrClosed) and
// closes the file once no commit is in progress.
func (g *GroupCommit) Close() error {
	close(g.quit)
	<-g.done
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	return g.f.Close()
}

// ErrClosed is returned to writers still waiting when Close is called.
var ErrClosed = errors.New("baseline: group commit closed")

// Write appends p and returns once it is synced.
func (g *GroupCommit) Write(p []byte) error {
	w := &pending{p: p, done: make(chan error, 1)}
	if g.commitMu.TryLock() {
		select {
		case <-g.quit: // Close waits for commitMu before closing the file
			g.commitMu.Unlock()
			return ErrClosed
		default:
		}
		g.commit(g.fill([]*pending{w}))
		g.commitMu.Unlock()
		return <-w.done
	}
	select {
	case g.queue <- w:
	case <-g.quit:
		return ErrClosed
	}
	select {
	case err := <-w.done:
		return err
	case <-g.quit:
		return ErrClosed
	}
}

// Counts returns the commits and the writes they held since Open.
func (g *GroupCommit) Counts() (commits, writes int64) {
	return g.commits.Load(), g.writes.Load()
}

func (g *GroupCommit) run() {
	defer close(g.done)
	for {
		select {
		case w := <-g.queue:
			g.commitMu.Lock()
			g.commit(g.fill([]*pending{w}))
			g.commitMu.Unlock()
		case <-g.quit:
			return
		}
	}
}

func (g *GroupCommit) fill(batch []*pending) []*pending {
	for {
		select {
		case w := <-g.queue:
			batch = append(batch, w)
		default:
			return batch
		}
	}
}

// commit writes the batch with one write and one fdatasync; commitMu is
// held.
func (g *GroupCommit) commit(batch []*pending) {
	var buf []byte
	for _, w := range batch {
		buf = append(buf, w.p...)
	}
	if g.off+int64(len(buf)) > g.size {
		g.off = 0
	}
	_, err := g.f.WriteAt(buf, g.off)
	if err == nil {
		g.off += int64(len(buf))
		err = atomicfile.SyncData(g.f)
	}
	if err != nil {
		err = errors.Join(errors.New("baseline group commit"), err)
	}
	g.commits.Add(1)
	g.writes.Add(int64(len(batch)))
	for _, w := range batch {
		w.done <- err
	}
}
