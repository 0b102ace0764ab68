package repo

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("snapshot store closed")

// WriteLock is the store's writer lock: one writer at a time (a Take, a
// Restore, an object received, GC while it reads and deletes refs,
// Close). No git of the store runs while it is held but the holder's,
// which is why a lock file found in the store is stale
// (ClearStaleLocks). Readers take none: they read refs and objects.
type WriteLock struct {
	mu     sync.Mutex
	closed atomic.Bool
}

// Lock takes the writer lock.
func (l *WriteLock) Lock() { l.mu.Lock() }

// Unlock lets it go.
func (l *WriteLock) Unlock() { l.mu.Unlock() }

// LockOpen takes the writer lock unless the store is closed: then it
// returns ErrClosed, the lock not taken.
func (l *WriteLock) LockOpen() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Closed reports whether the store is closed (safe without the lock).
func (l *WriteLock) Closed() bool { return l.closed.Load() }

// MarkClosed closes the store; the caller holds the lock.
func (l *WriteLock) MarkClosed() { l.closed.Store(true) }
