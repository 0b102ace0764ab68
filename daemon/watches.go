package daemon

import (
	"log/slog"
	"sync"

	"github.com/continuityd/continuityd/daemon/sources/watch"
)

// workdirWatches holds one shared workdir watcher per workdir: every agent
// of the daemon on a workdir subscribes to it (capture.Options.Watches),
// so the tree is watched once (one inotify instance, one watch per
// directory) however many agents work in it, and each is told every
// burst. The watcher runs while an agent is subscribed; the entry lives as
// long as the daemon.
type workdirWatches struct {
	mu  sync.Mutex
	m   map[string]*watch.Shared
	log *slog.Logger
}

// For is the shared watcher of workdir (nil: the agent has no workdir).
func (w *workdirWatches) For(workdir string) *watch.Shared {
	if workdir == "" {
		return nil
	}
	key := workdirKey(workdir)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*watch.Shared{}
	}
	if s, ok := w.m[key]; ok {
		return s
	}
	log := w.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &watch.Shared{Logger: log.With("workdir", key)}
	w.m[key] = s
	return s
}

// hold keeps every running watcher running until release is called: a
// reload stops the agents it reopens before it opens them again, and the
// tree must not be walked again for that.
func (w *workdirWatches) hold() (release func()) {
	w.mu.Lock()
	var held []*watch.Subscription
	for _, s := range w.m {
		if h := s.Hold(); h != nil {
			held = append(held, h)
		}
	}
	w.mu.Unlock()
	return func() {
		for _, h := range held {
			h.Close()
		}
	}
}

// running are the watchers running now.
func (w *workdirWatches) running() []*watch.Watcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*watch.Watcher
	for _, s := range w.m {
		if x := s.Watcher(); x != nil {
			out = append(out, x)
		}
	}
	return out
}
