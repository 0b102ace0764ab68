package storage

import "time"

// Lazy queues an op whose outcome nobody waits for; it commits with the
// next write or the next flush to bbolt, else on its own after the lazy
// delay (by default the flush delay) as a log record that is not synced
// (the next sync or flush makes it durable). A burst of work thus pays no
// separate wake-up and sync for its bookkeeping. Dropped silently after
// Close.
func (e *Engine[T]) Lazy(apply func(T) (uint64, error)) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return
	}
	e.lazyMu.Lock()
	defer e.lazyMu.Unlock()
	e.lazyOps = append(e.lazyOps, &Op[T]{Apply: apply})
	if e.lazyTimer == nil {
		// A delay left running by ops a commit has taken since serves this
		// one too: it only ends sooner. Arming a timer costs a resume (whose
		// visit is a lazy op) 2-3% when every resume follows a write.
		e.lazyTimer = time.AfterFunc(e.lazyDelay, func() {
			e.lazyMu.Lock()
			e.lazyTimer = nil
			e.lazyMu.Unlock()
			select {
			case e.flush <- struct{}{}:
			default:
			}
		})
	}
}

// takeLazy returns the lazy ops waiting, for the commit about to happen.
func (e *Engine[T]) takeLazy() []*Op[T] {
	e.lazyMu.Lock()
	defer e.lazyMu.Unlock()
	ops := e.lazyOps
	e.lazyOps = nil
	return ops
}
