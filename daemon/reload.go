package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/upstream/delx"
	"github.com/continuityd/continuityd/upstream/local"
	"github.com/continuityd/continuityd/upstream/qday"
)

// ErrNotRunning is Reload's answer when Run has stopped serving (it is
// shutting down, or it failed to start).
var ErrNotRunning = errors.New("the daemon is not running: nothing to reload")

// reloadRequest is one Reload waiting for Run to serve it.
type reloadRequest struct{ done chan error }

// Reload re-reads the configuration (SIGHUP, or the config file changed).
// An invalid file changes nothing and the error says why. Otherwise agents
// that were added start, agents that were removed stop (their state stays
// on disk), agents whose settings or upstreams changed restart, and every
// shipper retries at once, so a renewed token is used right away. Changes
// to [daemon] (socket, state directory, listener, logging) need a restart
// and are reported as such.
//
// Reload asks Run to do it and waits for the result: a Reload that comes
// before Run has built and started its agents (a SIGHUP right after start)
// waits until it has, and is then served; it never builds agents of its
// own beside Run's. Safe to call from any goroutine, before Run too.
func (d *Daemon) Reload() error {
	req := reloadRequest{done: make(chan error, 1)}
	select {
	case d.reloads <- req:
		return <-req.done
	case <-d.notServing:
		return ErrNotRunning
	}
}

// serveReloads serves first and every other Reload already waiting with
// one reload (they all asked before it began, so one reading of the file
// answers them all).
func (d *Daemon) serveReloads(ctx context.Context, first reloadRequest) {
	waiting := []reloadRequest{first}
	for more := true; more; {
		select {
		case req := <-d.reloads:
			waiting = append(waiting, req)
		default:
			more = false
		}
	}
	err := d.reload(ctx)
	for _, req := range waiting {
		req.done <- err
	}
}

// stopServingReloads makes every Reload, waiting or to come, return
// ErrNotRunning.
func (d *Daemon) stopServingReloads() {
	d.stopServingOne.Do(func() { close(d.notServing) })
}

// reload is Reload, run by Run's goroutine; ctx is the agents' context.
func (d *Daemon) reload(ctx context.Context) error {
	old := d.snap()
	// The token is no configuration: it is read again even when the file
	// turns out to be refused below.
	d.reloadToken(old.cfg.Daemon.StateDir)
	// The embedded default has no file to read again; a reload then only
	// retries the agents refused for damage (after `recover --accept-loss`).
	cfg := old.base
	if d.opts.Load != nil {
		var err error
		if cfg, err = d.opts.Load(); err != nil {
			d.metrics.reloads.WithLabelValues("refused").Inc()
			d.noteReload("refused", err)
			d.log.Error("config reload refused; the running configuration stays", "err", err)
			return err
		}
	}
	if cfg.Daemon != old.cfg.Daemon {
		d.log.Warn("changes to [daemon] take effect at the next restart; the rest is applied now")
		cfg.Daemon = old.cfg.Daemon
	}
	d.ledgers.SetMaxShell(cfg.Watch.ShellMax.Duration)
	// The owners' workers no agent acts as any more end last, once the
	// watchers held below, which may read through them, are released.
	defer d.stopIdleWorkers()
	// The workdirs' watchers outlive the agents reopened on them.
	release := d.watches.hold()
	defer release()
	withPlaces, placeNames := d.withPlaces(cfg)
	next, err := d.build(withPlaces, old)
	next.base, next.places = cfg, placeNames
	d.st.Store(next)
	next.logDamaged(d.log)
	var added, removed, kept []string
	var starting []*agent.Agent
	for _, name := range next.names {
		a := next.agents[name]
		if old.agents[name] == a {
			kept = append(kept, name)
			a.Kick()
		} else {
			added = append(added, name)
			starting = append(starting, a)
		}
	}
	startAll(ctx, starting)
	for _, name := range old.names {
		if _, ok := next.agents[name]; !ok {
			removed = append(removed, name)
		}
	}
	for name, ur := range old.ups {
		if next.ups[name] != ur {
			ur.Close()
		}
	}
	releaseFleets(old, next, removed)
	if len(added) > 0 {
		// Events hooks spooled for an agent that was refused are stored
		// now, whether or not the rest of the reload went well.
		d.spool.Kick()
	}
	if err != nil {
		d.metrics.reloads.WithLabelValues("partial").Inc()
		d.noteReload("partial", err)
		d.log.Error("config reloaded with errors", "err", err, "started", added, "stopped", removed, "kept", kept)
		return err
	}
	d.metrics.reloads.WithLabelValues("ok").Inc()
	d.noteReload("ok", nil)
	d.log.Info("config reloaded", "started", added, "stopped", removed, "kept", kept)
	return nil
}

// noteReload keeps how the reload that just ended went, for status.
func (d *Daemon) noteReload(outcome string, err error) {
	r := &api.ReloadStatus{At: time.Now().UTC(), Outcome: outcome}
	if err != nil {
		r.Error = err.Error()
	}
	d.lastReload.Store(r)
}

// build makes the snapshot for cfg, carrying over from old every upstream
// runtime and agent whose configuration did not change, and stopping the
// old agents that are not carried over (removed or changed) before their
// replacements open the same files. New agents are opened, not started.
// An agent that cannot be opened is left out and reported in the error.
func (d *Daemon) build(cfg *config.Config, old *snapshot) (*snapshot, error) {
	next := &snapshot{cfg: cfg, agents: map[string]*agent.Agent{}, ups: map[string]*agent.Upstream{}, damaged: map[string]error{},
		owners: map[string]uint32{}}
	var errs []error
	next.guard = old.guard
	if old.guard == nil || !slices.Equal(old.cfg.Guard.AllowedLinkDomains, cfg.Guard.AllowedLinkDomains) {
		g, err := newGuard(cfg)
		if err != nil {
			return old, err
		}
		next.guard = g
	}
	for _, ac := range cfg.Agents {
		for _, name := range ac.Upstreams {
			if _, ok := next.ups[name]; ok {
				continue
			}
			uc, ok := cfg.UpstreamFor(name)
			if !ok {
				errs = append(errs, fmt.Errorf("agent %s: unknown upstream %q", ac.Name, name))
				continue
			}
			if ou, ok := old.ups[name]; ok && ou.Cfg == uc {
				next.ups[name] = ou
				continue
			}
			ur, err := d.newUpstream(name, uc, cfg)
			if err != nil {
				errs = append(errs, fmt.Errorf("upstream %s: %w", name, err))
				continue
			}
			next.ups[name] = ur
		}
	}
	keep := map[string]bool{}
	for _, ac := range cfg.Agents {
		if oa, ok := old.agents[ac.Name]; ok && d.sameAgent(oa, ac, old, next) {
			keep[ac.Name] = true
		}
	}
	for _, name := range old.names {
		if !keep[name] {
			d.ledgers.Listen(old.agents[name].Config().Workdir, name, nil)
			if err := old.agents[name].Stop(); err != nil {
				errs = append(errs, fmt.Errorf("agent %s: stop: %w", name, err))
			}
		}
	}
	// The agents not carried over are opened side by side (opening.go),
	// then taken in config order.
	jobs := make([]*openJob, len(cfg.Agents))
	for i, ac := range cfg.Agents {
		if keep[ac.Name] {
			continue
		}
		missing := false
		for _, u := range ac.Upstreams {
			missing = missing || next.ups[u] == nil
		}
		if missing {
			continue // reported above
		}
		isPlace := d.placeNames[ac.Name]
		if !isPlace {
			d.inherit(ac, cfg) // an adopted place configured by name keeps its history
		}
		ao := agentOptions(cfg, ac, next.ups, d.ledgers.For(ac.Workdir), next.guard, d.log, d.metrics)
		// A place watched again reports what changed while it was not
		// as changed by nobody's tool: outside.
		ao.Capture.CatchUpOutside = isPlace
		if ac.Workdir != "" {
			ao.Capture.OnConflict = d.ledgers.Teller(ac.Workdir)
		}
		ao.Capture.RestoreGate = d.gates.For(ac.Workdir)
		ao.Capture.Watches = d.watches.For(ac.Workdir)
		ao.Capture.TranscriptClaims = d.transcripts.For(ac.Workdir)
		j := &openJob{opts: ao}
		j.uid, j.asOwner = d.asOwner(&j.opts, cfg, ac)
		jobs[i] = j
	}
	openAll(jobs)
	for i, ac := range cfg.Agents {
		if keep[ac.Name] {
			next.agents[ac.Name], next.names = old.agents[ac.Name], append(next.names, ac.Name)
			if uid, ok := old.owners[ac.Name]; ok {
				next.owners[ac.Name] = uid
			}
			continue
		}
		j := jobs[i]
		if j == nil {
			continue
		}
		a, err := j.a, j.err
		var damage *residency.DamageError
		var moved *place.MovedError
		if errors.As(err, &damage) || errors.As(err, &moved) {
			next.damaged[ac.Name] = err // logged by the caller; the others run
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next.agents[ac.Name], next.names = a, append(next.names, ac.Name)
		if j.asOwner {
			next.owners[ac.Name] = j.uid
		}
		d.ledgers.Listen(ac.Workdir, ac.Name, a.TellConflict)
	}
	return next, errors.Join(errs...)
}

// sameAgent reports whether the running agent oa can serve ac unchanged:
// the wiring builds it the same options from the new configuration as from
// the old (its table, [outbox], [snapshots], [watch], [policy],
// [transcripts]: each package holds its own copy, so a change reaches it
// only by reopening the agent).
func (d *Daemon) sameAgent(oa *agent.Agent, ac config.Agent, old, next *snapshot) bool {
	if !reflect.DeepEqual(agentOptions(old.cfg, oa.Config(), nil, nil, nil, nil, nil), agentOptions(next.cfg, ac, nil, nil, nil, nil, nil)) {
		return false
	}
	// The agent's capture checks what it derives with the guard it was
	// opened with: a new guard (other link domains) reopens the agent.
	if old.guard != next.guard {
		return false
	}
	for _, u := range ac.Upstreams {
		if old.ups[u] == nil || old.ups[u] != next.ups[u] {
			return false
		}
	}
	return true
}

// newUpstream builds the runtime of one upstream: its client, its rate
// limit, whether its outbox coalesces runs of state-only checkpoints (only
// where each call costs: the local archive and the fleet keep every
// write), and, for a fleet, the client as the agents' Fleet.
func (d *Daemon) newUpstream(name string, uc config.Upstream, cfg *config.Config) (*agent.Upstream, error) {
	ur := &agent.Upstream{Cfg: uc, Limiter: newLimiter(uc)}
	switch uc.Kind {
	case config.KindLocal:
		ur.Client = local.New(name, cfg.AgentDir).WithLogger(d.log)
		// The archive is for people: a write that comes alone is
		// stored at once, and those of a flood wait up to a fifth of a
		// second to share one flush, which spares the disk.
		ur.Linger = 200 * time.Millisecond
	case config.KindDelx:
		roots, err := uc.CAPool()
		if err != nil {
			return nil, err
		}
		c, err := delx.New(delx.Options{Name: name, URL: uc.URL, Identity: d.delxIdentity(name, cfg), Timeout: uc.Timeout.Duration, RootCAs: roots})
		if err != nil {
			return nil, err
		}
		ur.Client = c
	case config.KindNATS:
		c, err := d.newFleet(name, uc, cfg)
		if err != nil {
			return nil, err
		}
		ur.Client, ur.Fleet = c, c
	case config.KindQDay:
		roots, err := uc.CAPool()
		if err != nil {
			return nil, err
		}
		c, err := qday.New(qday.Options{Name: name, URL: uc.URL, Token: uc.Token, Timeout: uc.Timeout.Duration,
			UserAgent: "continuityd/" + d.version, RootCAs: roots})
		if err != nil {
			return nil, err
		}
		ur.Client, ur.Coalesce = c, true
	default:
		return nil, fmt.Errorf("kind %q is not available in this build yet", uc.Kind)
	}
	return ur, nil
}

// delxIdentity is the identity source of the delx upstream name: for each
// call, the agent's [agent.identity.NAME] of the running configuration,
// else the identity `continuityd delx register` kept in its state
// directory (read at every call, so a registration applies without a
// restart), else the upstream's older shared token under the agent's name
// and a made-up session (which a Delx that checks sessions refuses).
//
// An agent with an [agent.delx_fleet.NAME] has its fleet_id and the fleet's
// invite token (read at every call, like the token) added to its identity.
func (d *Daemon) delxIdentity(name string, built *config.Config) func(string) (delx.Identity, error) {
	var warned sync.Map // agents told they use the shared token
	own := func(cfg *config.Config, ac config.Agent, agent string) (delx.Identity, error) {
		if id, ok := ac.Identity[name]; ok {
			tok, err := id.Token()
			if err != nil {
				return delx.Identity{}, fmt.Errorf("[agent.identity.%s] of agent %s: %w", name, agent, err)
			}
			return delx.Identity{AgentID: id.AgentID, SessionID: id.SessionID, Token: tok}, nil
		}
		stored, err := delx.ReadIdentityFile(delx.IdentityPath(cfg.AgentDir(agent), name))
		switch uc, _ := cfg.UpstreamFor(name); {
		case err == nil:
			return stored.Identity(), nil
		case !errors.Is(err, delx.ErrNotRegistered):
			return delx.Identity{}, err
		case uc.HasToken():
			if _, seen := warned.LoadOrStore(agent, true); !seen {
				d.log.Warn("agent has no Delx identity of its own; using the upstream's shared token under the agent's name and a made-up session_id, which Delx refuses when it checks sessions: run `continuityd delx register`",
					"agent", agent, "upstream", name)
			}
			tok, err := uc.Token()
			return delx.Identity{AgentID: agent, SessionID: "continuityd-" + agent, Token: tok}, err
		}
		return delx.Identity{}, fmt.Errorf("agent %s has no Delx identity for upstream %s: run `continuityd delx register --agent %s --upstream %s`, or set [agent.identity.%s] in the config",
			agent, name, agent, name, name)
	}
	return func(agent string) (delx.Identity, error) {
		cfg := built
		if s := d.snap(); s != nil {
			cfg = s.cfg
		}
		ac, _ := cfg.Agent(agent)
		id, err := own(cfg, ac, agent)
		if err != nil {
			return id, err
		}
		if f, ok := ac.DelxFleet[name]; ok {
			invite, err := f.InviteToken()
			if err != nil {
				return delx.Identity{}, fmt.Errorf("[agent.delx_fleet.%s] of agent %s: %w", name, agent, err)
			}
			id.FleetID, id.InviteToken = f.FleetID, invite
		}
		return id, nil
	}
}

// watchConfig starts watching the config file and returns the loop that
// reloads when it changes (nil when it cannot watch). It watches the
// directory, not the file, so an editor's save-by-rename is seen too; the
// watch is in place before Run reports ready.
func (d *Daemon) watchConfig(path string) func(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		d.log.Warn("cannot watch the config file; reload with SIGHUP", "err", err)
		return nil
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		d.log.Warn("cannot watch the config file; reload with SIGHUP", "path", path, "err", err)
		return nil
	}
	return func(ctx context.Context) {
		defer w.Close()
		d.configLoop(ctx, w, path)
	}
}

func (d *Daemon) configLoop(ctx context.Context, w *fsnotify.Watcher, path string) {
	const settle = 300 * time.Millisecond // an editor's save is several events
	var timer *time.Timer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) != filepath.Clean(path) || ev.Op == fsnotify.Chmod {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(settle)
			} else {
				timer.Reset(settle)
			}
			fire = timer.C
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			d.log.Warn("config file watch", "err", err)
		case <-fire:
			fire = nil
			d.log.Info("config file changed; reloading", "path", path)
			d.Reload()
		}
	}
}

// newLimiter is the upstream's token bucket. It starts empty, not full: a
// daemon restarted right after spending its burst must not spend another,
// so that across restarts no window sees more than rate × t + burst calls.
func newLimiter(uc config.Upstream) *rate.Limiter {
	burst := max(uc.Burst, 1)
	l := rate.NewLimiter(rate.Limit(uc.Rate), burst)
	l.AllowN(time.Now(), burst)
	return l
}
