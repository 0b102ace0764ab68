package daemon

import (
	"log/slog"

	"github.com/continuityd/continuityd/daemon/sources/watch"
)

// workdirWatches holds one shared workdir watcher per workdir: every agent
// of the daemon on a workdir subscribes to it (capture.Options.Watches),
// so the tree is watched once (one inotify instance, one watch per
// directory) however many agents work in it, and each is told every
// burst. The watcher runs while an agent is subscribed; the entry lives as
// long as the daemon.
type workdirWatches struct {
	perWorkdir[watch.Shared]
}

// newWorkdirWatches names each watcher's workdir in its log lines.
func newWorkdirWatches(log *slog.Logger) workdirWatches {
	return workdirWatches{perWorkdir[watch.Shared]{fresh: func(key string) *watch.Shared {
		return &watch.Shared{Logger: log.With("workdir", key)}
	}}}
}

// hold keeps every running watcher running until release is called: a
// reload stops the agents it reopens before it opens them again, and the
// tree must not be walked again for that.
func (w *workdirWatches) hold() (release func()) {
	var held []*watch.Subscription
	w.each(func(s *watch.Shared) {
		if h := s.Hold(); h != nil {
			held = append(held, h)
		}
	})
	return func() {
		for _, h := range held {
			h.Close()
		}
	}
}

// running are the watchers running now.
func (w *workdirWatches) running() []*watch.Watcher {
	var out []*watch.Watcher
	w.each(func(s *watch.Shared) {
		if x := s.Watcher(); x != nil {
			out = append(out, x)
		}
	})
	return out
}
