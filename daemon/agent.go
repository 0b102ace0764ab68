package daemon

import (
	"context"
	"log/slog"
	"sync"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/daemon/outbox"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/upstream"
)

// feedWindow is how many recent events an agent's wait feed keeps.
const feedWindow = 512

// agent is one served agent at run time: its residency, its event feed and
// one shipper per upstream. Data flows store → shippers → upstreams.
type agent struct {
	name     string
	cfg      config.Agent
	dir      string
	store    *residency.Store
	feed     *events.Feed
	shippers []*outbox.Shipper

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// openAgent opens the agent's residency and prepares its shippers.
func openAgent(cfg *config.Config, ac config.Agent, ups map[string]upstream.Upstream, log *slog.Logger) (*agent, error) {
	a := &agent{name: ac.Name, cfg: ac, dir: cfg.AgentDir(ac.Name), feed: events.New(feedWindow)}
	store, err := residency.Open(residency.Options{
		Agent:     ac.Name,
		Dir:       a.dir,
		Upstreams: ac.Upstreams,
		OnCommit:  a.onCommit,
	})
	if err != nil {
		return nil, err
	}
	a.store = store
	for _, name := range ac.Upstreams {
		a.shippers = append(a.shippers, outbox.New(outbox.Options{
			Agent: ac.Name, Store: store, Upstream: ups[name], Upstreams: ac.Upstreams, Logger: log,
		}))
	}
	return a, nil
}

// onCommit runs on the store's writer goroutine after each commit: wake the
// shippers when the log grew and tell the wait callers. It never blocks.
func (a *agent) onCommit(evs []residency.Event) {
	logged := false
	out := make([]events.Event, 0, len(evs))
	for _, e := range evs {
		logged = logged || e.Logged
		ev := events.Event{Kind: e.Kind, Seq: e.Seq, Origin: string(e.Origin), Summary: e.Summary}
		if e.Signal != nil {
			ev.Data = e.Signal
		}
		out = append(out, ev)
	}
	if logged {
		for _, s := range a.shippers {
			s.Notify()
		}
	}
	a.feed.Publish(out...)
}

// start runs the shippers until stop.
func (a *agent) start(ctx context.Context) {
	ctx, a.cancel = context.WithCancel(ctx)
	for _, s := range a.shippers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			s.Run(ctx)
		}()
	}
}

// stop stops the shippers and closes the residency.
func (a *agent) stop() error {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	return a.store.Close()
}

// upstreamStates is the agent's delivery state per upstream.
func (a *agent) upstreamStates() []capsule.UpstreamState {
	out := make([]capsule.UpstreamState, 0, len(a.shippers))
	for _, s := range a.shippers {
		out = append(out, s.State())
	}
	return out
}

// resume is the full resume document: the residency plus the upstream view.
func (a *agent) resume(visit bool) capsule.Resume {
	r := a.store.Resume(visit)
	r.Upstreams = a.upstreamStates()
	return r
}
