package daemon

import (
	"context"
	"sync"

	"github.com/continuityd/continuityd/daemon/agent"
)

// Opening and starting many agents at once. Opening an agent is mostly
// waiting (its residency's fsync, a few git runs for its snapshot store)
// and starting one waits for its watcher to be in place: fifty places one
// after another took seconds on an idle machine, most of it asleep. They
// run side by side instead, at most openParallel at a time so that a
// hundred places do not start a hundred git processes together.

// openParallel bounds the agents opened or started at once.
const openParallel = 8

// openJob is one agent to open: its options, and what Open returned.
type openJob struct {
	opts    agent.Options
	uid     uint32 // the owner whose worker it acts as, when asOwner
	asOwner bool

	a   *agent.Agent
	err error
}

// openAll opens every job not nil, at most openParallel at a time, and
// returns once all are done.
func openAll(jobs []*openJob) {
	sem := make(chan struct{}, openParallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		if j == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j.a, j.err = agent.Open(j.opts)
		})
	}
	wg.Wait()
}

// startAll starts agents, at most openParallel workdirs at a time; the
// agents of one workdir start in order, one after another (they share its
// watcher and restore gate, and the first one's walk serves the others).
// It returns once each has started (its watcher in place).
func startAll(ctx context.Context, agents []*agent.Agent) {
	var order []string
	byWorkdir := map[string][]*agent.Agent{}
	for _, a := range agents {
		key := workdirKey(a.Config().Workdir)
		if a.Config().Workdir == "" {
			key = "\x00" + a.Config().Name // no workdir: nothing shared
		}
		if _, ok := byWorkdir[key]; !ok {
			order = append(order, key)
		}
		byWorkdir[key] = append(byWorkdir[key], a)
	}
	sem := make(chan struct{}, openParallel)
	var wg sync.WaitGroup
	for _, key := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, a := range byWorkdir[key] {
				a.Start(ctx)
			}
		})
	}
	wg.Wait()
}
