// Package daemon is continuityd's wiring: it builds each part from the
// checked configuration and runs them together. It opens each agent's
// residency, starts the shippers that carry accepted writes to the
// upstreams, and serves the local API on the Unix socket (and, when
// configured, a loopback TCP listener that requires a token); it reloads
// and stops them. Each part with state and a loop of its own (the spool,
// the attribution ledgers, the watchers, the token's file) is a package of
// its own: here are only start, reload, options, metrics and shutdown.
//
// Writes flow one way: sources (the local API, hooks, the workdir watcher,
// handoff files, transcripts: package capture) → residency (durable) →
// outbox → upstream clients. The fleet also flows back: at start an agent
// may restore its state from the fleet (agent.Fleet), through the same
// guards as a local write.
//
// The running configuration is one immutable snapshot (config, guard,
// agents, upstreams) swapped whole by Reload; request handlers read the
// snapshot current when they start.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/capsule/schema"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/apitoken"
	"github.com/continuityd/continuityd/daemon/asowner"
	"github.com/continuityd/continuityd/daemon/attribution/ledgers"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/sources/spool"
	"github.com/continuityd/continuityd/daemon/ui"
	"github.com/continuityd/continuityd/internal/safesocket"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// Options are the daemon's run-time collaborators.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Ready, when set, is called once the socket listens (systemd readiness).
	Ready func()
	// Stopping, when set, is called when shutdown begins.
	Stopping func()
	// Load re-reads the configuration for Reload (SIGHUP, or the config
	// file changing). nil: reloading is not possible (the embedded default).
	Load func() (*config.Config, error)
	// FollowCwd is set for the embedded default, whose agent belongs to the
	// directory the daemon was started in: state kept for another directory
	// is parked, and this directory's brought back (package place).
	FollowCwd bool
}

// Daemon serves a set of agents. Build it with New, then call Run.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	version string
	started time.Time
	metrics *metrics

	st atomic.Pointer[snapshot]
	// reloads carries Reload's requests to Run, the one owner of the
	// running state: Run serves them only once its agents are built and
	// started, so a reload asked for during start-up waits for that
	// instead of building agents beside Run's.
	reloads chan reloadRequest
	// notServing is closed when Run no longer serves reloads (it is
	// stopping, or failed to start); Reload then returns ErrNotRunning.
	notServing     chan struct{}
	stopServingOne sync.Once
	// lastReload is how the last reload went (nil before any), for
	// status: a reload refused for a typo must not look healthy.
	lastReload atomic.Pointer[api.ReloadStatus]

	// apiToken is the loopback listener's token now ("" when there is
	// none, or it was refused at a reload: nothing is served there then).
	apiToken atomic.Pointer[string]

	spool *spool.Ingester // the hook events spooled while the daemon was down

	ledgers ledgers.Set    // who changed what, one ledger per workdir
	gates   workdirGates   // a restore by one agent is no lost work for the others on its workdir
	watches workdirWatches // one watcher per workdir, however many agents work in it

	transcripts workdirTranscripts // which agent on a workdir follows which transcript

	// owners are the workers of the workdirs' owners, when the daemon
	// runs as root over other users' workdirs (owners.go); none start
	// otherwise.
	owners *asowner.Pool

	// page is the web page (package ui), once Run serves.
	page atomic.Pointer[ui.Server]

	// places are the projects sessions adopted (places.go), set by Run
	// before it serves; adopts carries a request to watch one to Run.
	places *placeSet
	adopts chan placeRequest
	// placeNames are the agents of the configuration being built that
	// are places (withPlaces; used by build, both on Run's goroutine).
	placeNames map[string]bool
}

// workdirs names each agent's workdir, "name=dir" in config order ("name="
// for an agent without one), for the start line.
func (s *snapshot) workdirs() []string {
	out := make([]string, 0, len(s.cfg.Agents))
	for _, ac := range s.cfg.Agents {
		out = append(out, ac.Name+"="+ac.Workdir)
	}
	return out
}

// snapshot is one running configuration. Agents and upstream runtimes are
// carried over between snapshots when their configuration did not change.
type snapshot struct {
	cfg *config.Config
	// base is the configuration cfg was made from: cfg is base with the
	// watched places added as agents, places names them.
	base   *config.Config
	places map[string]bool
	guard  *guard.Guard
	agents map[string]*agent.Agent
	names  []string // config order
	ups    map[string]*agent.Upstream
	// damaged holds the agents refused before they were opened: their
	// files are damaged (a residency.DamageError) or their state belongs
	// to another workdir (a place.MovedError). They are not served until
	// an operator acts and the daemon reloads; the others run.
	damaged map[string]error
	// owners are the uids of the owners' workers the agents act as
	// (owners.go), by agent name.
	owners map[string]uint32
}

// New checks what can be checked before anything is opened: the guard's
// rule set and the upstream kinds.
func New(cfg *config.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g, err := newGuard(cfg)
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, log: opts.Logger, version: opts.Version, metrics: newMetrics(),
		reloads: make(chan reloadRequest), notServing: make(chan struct{}), adopts: make(chan placeRequest)}
	d.st.Store(&snapshot{cfg: cfg, base: cfg, guard: g, agents: map[string]*agent.Agent{}, ups: map[string]*agent.Upstream{}, damaged: map[string]error{}})
	d.metrics.register(d)
	d.ledgers.Conflicts = d.metrics.conflicts
	d.spool = spool.New(cfg.Daemon.StateDir, d.storeSpooled, d.log)
	d.watches = newWorkdirWatches(d.log)
	d.owners = asowner.NewPool(asowner.Options{Logger: d.log})
	return d, nil
}

func newGuard(cfg *config.Config) (*guard.Guard, error) {
	sch, err := schema.Compile()
	if err != nil {
		return nil, fmt.Errorf("build guards: %w", err)
	}
	g, err := guard.New(guard.Options{AllowedLinkDomains: cfg.Guard.AllowedLinkDomains, CapsuleSchema: sch})
	if err != nil {
		return nil, fmt.Errorf("build guards: %w", err)
	}
	return g, nil
}

// snap is the running snapshot.
func (d *Daemon) snap() *snapshot { return d.st.Load() }

// Run opens every agent, serves the API until ctx ends, then shuts down:
// the listeners stop taking requests, in-flight ones get the shutdown
// timeout, the shippers get what is left of it to deliver what is pending,
// and every residency is closed. Everything accepted is already on disk, so
// nothing is lost by stopping, whatever the upstreams do. While it serves,
// Run is also where every reload happens (see Reload). Run is called once.
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.started = time.Now().UTC()
	defer d.stopServingReloads()
	shipCtx, cancelShip := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelShip()
	st := d.snap()
	defer func() {
		cancelShip()
		if cerr := d.snap().close(); cerr != nil && err == nil {
			err = cerr
		}
		d.owners.Close() // after the agents, whose stores they host
		d.ledgers.Save() // what the agents' last events told it
		if d.places != nil {
			d.places.reg.Save() // the places' last sessions
		}
	}()
	if err := statefiles.Prepare(st.cfg.Daemon.StateDir, statefiles.ModesFor(st.cfg.Daemon.SocketPerm())); err != nil {
		return fmt.Errorf("state directory %s: %w", st.cfg.Daemon.StateDir, err)
	}
	unlock, err := statefiles.LockStateDir(st.cfg.Daemon.StateDir, st.cfg.Daemon.Socket)
	if err != nil {
		return err
	}
	defer unlock()
	d.ledgers.KeepIn(st.cfg.Daemon.StateDir, d.log)
	d.ledgers.SetMaxShell(st.cfg.Watch.ShellMax.Duration)
	if d.opts.FollowCwd {
		if err := d.settlePlaces(st.cfg); err != nil {
			return err
		}
	}
	if d.places, err = d.openPlaces(st.cfg); err != nil {
		return err
	}
	withPlaces, placeNames := d.withPlaces(st.base)
	next, err := d.build(withPlaces, st)
	if err != nil {
		next.closeNew(st)
		return err
	}
	next.base, next.places = st.base, placeNames
	d.st.Store(next)
	next.logDamaged(d.log)

	listeners, err := d.listen(next.cfg)
	if err != nil {
		return err
	}
	for _, name := range next.names {
		next.agents[name].Start(shipCtx)
	}

	// Requests (long polls above all) end when shutdown begins.
	reqCtx, cancelReq := context.WithCancel(context.Background())
	defer cancelReq()
	servers := make([]*api.Server, len(listeners))
	serveErr := make(chan error, len(listeners))
	var wg sync.WaitGroup
	timeouts := api.Timeouts{Read: next.cfg.Daemon.ReadTimeout.Duration,
		Idle: next.cfg.Daemon.IdleTimeout.Duration, Write: next.cfg.Daemon.WriteTimeout.Duration}
	var pageAPI http.Handler // the page calls the operations here, in process
	page := newPage(d.log, timeouts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pageAPI.ServeHTTP(w, r) }))
	d.page.Store(page)
	doors := api.New(api.Options{Runtime: d, Version: d.version, Logger: d.log,
		Metrics: d.metrics.handler(), Requests: d.metrics.requests, Refused: d.metrics.refused,
		MCPMaxSessions: next.cfg.Daemon.MCPMaxSessions, MCPSessionIdle: next.cfg.Daemon.MCPSessionIdle.Duration,
		MCPSessions: d.metrics.mcpLive, MCPEvicted: d.metrics.mcpEvicted,
		Stopping: shipCtx, Token: d.token, UI: page})
	pageAPI = doors.Handler()
	for i, l := range listeners {
		h := doors.Handler()
		if i > 0 { // the loopback TCP listener, which serves the page too
			h = loopbackDoors(doors, page, l.Addr())
		}
		servers[i] = api.NewServer(h, reqCtx, d.log, timeouts)
		if i == 0 { // the Unix socket: each agent serves only the users it admits
			servers[i].ConnContext = api.PeerContext
		} else {
			servers[i].ConnContext = ui.ConnContext
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := servers[i].Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
	}
	if next.cfg.Path != "" && d.opts.Load != nil {
		if loop := d.watchConfig(next.cfg.Path); loop != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				loop(reqCtx)
			}()
		}
	}
	if note := config.PathsNote(next.cfg.Daemon.StateDir, next.cfg.Daemon.Socket); note != "" {
		d.log.Info(note)
	}
	d.log.Info("continuityd listening", "socket", next.cfg.Daemon.Socket, "listen", next.cfg.Daemon.Listen,
		"state_dir", next.cfg.Daemon.StateDir, "agents", next.names, "workdirs", next.workdirs(),
		"config", configName(next.cfg), "version", d.version)
	// The spool is stored once the daemon answers: however many events
	// it holds, they never hold off the socket.
	ingested := make(chan struct{}) // the spool's first pass is over
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.spool.Loop(reqCtx, func() { close(ingested) })
	}()
	opened := make(chan struct{}) // the places watched again are open
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.returnStartMemory(reqCtx, opened, ingested)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.ledgers.SaveLoop(reqCtx)
	}()
	if d.opts.Ready != nil {
		d.opts.Ready()
	}
	d.watchAtStart(shipCtx)
	close(opened)

	idle := time.NewTicker(d.places.idleEvery())
	defer idle.Stop()
	for serving := true; serving; {
		select {
		case <-ctx.Done():
			serving = false
		case err = <-serveErr:
			d.log.Error("listener failed", "err", err)
			serving = false
		case req := <-d.reloads:
			d.serveReloads(shipCtx, req)
		case req := <-d.adopts:
			d.servePlace(shipCtx, req)
		case <-idle.C:
			d.unwatchIdle(shipCtx)
		}
	}
	// From here a Reload (the config watcher's, a SIGHUP's) returns at once
	// instead of waiting for a loop that no longer serves.
	d.stopServingReloads()
	if d.opts.Stopping != nil {
		d.opts.Stopping()
	}
	timeout := d.snap().cfg.Daemon.ShutdownTimeout.Duration
	deadline := time.Now().Add(timeout)
	d.log.Info("shutting down", "timeout", timeout)
	cancelReq()
	shutCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(shutCtx); serr != nil {
			d.log.Warn("shutdown: requests still running were cut", "err", serr)
			s.Close()
		}
	}
	if serr := page.Shutdown(shutCtx); serr != nil {
		d.log.Warn("shutdown: the web page's requests still running were cut", "err", serr)
	}
	if werr := doors.WaitStdioSessions(shutCtx); werr != nil {
		d.log.Warn("shutdown: MCP sessions on stdio still running were left", "err", werr)
	}
	wg.Wait()
	d.drain(shutCtx)
	return err
}

// drain gives the shippers until ctx ends to deliver what is pending. What
// is still pending then stays on disk and goes at the next start.
func (d *Daemon) drain(ctx context.Context) {
	st := d.snap()
	for _, name := range st.names {
		st.agents[name].Kick()
	}
	for {
		pending := 0
		for _, name := range st.names {
			for _, u := range st.agents[name].UpstreamStates() {
				pending += u.Pending
			}
		}
		if pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			d.log.Warn("stopping with writes not yet delivered; they are on disk and go out at the next start", "pending", pending)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listen opens the Unix socket and, when configured, the loopback listener.
func (d *Daemon) listen(cfg *config.Config) ([]net.Listener, error) {
	ln, err := safesocket.Listen(cfg.Daemon.Socket, cfg.Daemon.SocketPerm())
	if err != nil {
		return nil, err
	}
	socketLimits, loopbackConns := doorBudget(openFileLimit(), cfg.Daemon.MCPMaxSessions)
	d.log.Debug("doors bounded", "socket_connections", socketLimits.Total, "socket_per_user", socketLimits.PerUser,
		"loopback_connections", loopbackConns)
	listeners := []net.Listener{api.SocketListener(ln, socketLimits, d.log)}
	if cfg.Daemon.Listen != "" {
		tok, err := apitoken.LoadOrCreate(cfg.Daemon.StateDir)
		if err != nil {
			ln.Close()
			return nil, err
		}
		d.apiToken.Store(&tok)
		tln, err := net.Listen("tcp", cfg.Daemon.Listen)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("daemon.listen %s: %w", cfg.Daemon.Listen, err)
		}
		listeners = append(listeners, api.LimitListener(tln, loopbackConns))
	}
	return listeners, nil
}

func configName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "(embedded default)"
	}
	return cfg.Path
}

// close stops every agent of the snapshot, then its upstream clients.
func (s *snapshot) close() error {
	var first error
	for _, name := range s.names {
		if err := s.agents[name].Stop(); err != nil && first == nil {
			first = err
		}
	}
	for _, ur := range s.ups {
		ur.Close()
	}
	return first
}

// logDamaged says, for each agent refused for damage, what was found and
// the way out.
func (s *snapshot) logDamaged(log *slog.Logger) {
	for _, ac := range s.cfg.Agents {
		if err := s.damaged[ac.Name]; err != nil {
			var moved *place.MovedError
			if errors.As(err, &moved) {
				log.Error("agent refused: its state belongs to another workdir; the other agents run", "agent", ac.Name,
					"state", moved.Dir, "belongs_to", moved.Recorded, "workdir", moved.Workdir, "way_out", moved.Error())
				continue
			}
			var de *residency.DamageError
			errors.As(err, &de)
			log.Error("agent refused: its files are damaged; the other agents run", "agent", ac.Name,
				"file", de.Path, "found", de.Found, "lost", de.Lost,
				"way_out", "continuityd recover --agent "+ac.Name+" --accept-loss, then reload")
		}
	}
}

// closeNew stops the agents of s that are not also in old (a build that
// failed half way).
func (s *snapshot) closeNew(old *snapshot) {
	if s == nil {
		return
	}
	for _, name := range s.names {
		if old.agents[name] != s.agents[name] {
			s.agents[name].Stop()
		}
	}
}

// agentFor picks the agent a request names; else the one whose workdir
// holds cwd (hooks know their directory, not the agent's name); else the
// only one. Its refusals are api.AgentChoice, which the API shows a caller
// naming only the agents it may use.
//
// A cwd that lies in no agent's workdir picks none, when any agent has a
// workdir or places are adopted: an agent is its place, and another directory's state is not
// this one's (the refusal's Reason says so; the daemon may then adopt the
// directory's project as a place).
func (s *snapshot) agentFor(name, cwd string) (*agent.Agent, *api.AgentChoice) {
	if name == "" && cwd != "" {
		workdirs, placed := map[string]string{}, false
		for _, ac := range s.cfg.Agents {
			if s.agents[ac.Name] != nil || s.damaged[ac.Name] != nil {
				workdirs[ac.Name] = ac.Workdir
				placed = placed || ac.Workdir != ""
			}
		}
		name = statefiles.AgentByCwd(workdirs, cwd)
		if name == "" && placed {
			// The workdirs as places compare them: symbolic links
			// resolved on both sides.
			canon := map[string]string{}
			for n, wd := range workdirs {
				if wd != "" {
					canon[n] = place.Canonical(wd)
				}
			}
			name = statefiles.AgentByCwd(canon, place.Canonical(cwd))
		}
		if name == "" && (placed || s.cfg.Places.Adopt) {
			why := fmt.Sprintf("%s lies in no place of this daemon", cwd)
			return nil, &api.AgentChoice{Served: s.names, Reason: why, Refusal: capsule.Refuse(capsule.CodeAgentRequired, "agent",
				"%s; the agents here: %v; name one with ?agent=", why, s.names)}
		}
	}
	if name == "" {
		if len(s.names) == 1 && len(s.damaged) == 0 {
			return s.agents[s.names[0]], nil
		}
		if len(s.names) == 0 && len(s.damaged) == 1 {
			for n := range s.damaged {
				name = n
			}
		} else {
			return nil, &api.AgentChoice{Served: s.names, Refusal: capsule.Refuse(capsule.CodeAgentRequired, "agent",
				"this daemon serves %d agents (%v); name one with ?agent=", len(s.names), s.names)}
		}
	}
	if err, ok := s.damaged[name]; ok {
		if moved := (*place.MovedError)(nil); errors.As(err, &moved) {
			return nil, &api.AgentChoice{Agent: name, Refusal: capsule.Refuse(capsule.CodeAgentMoved, "agent", "%v", err)}
		}
		return nil, &api.AgentChoice{Agent: name, Refusal: capsule.Refuse(capsule.CodeAgentDamaged, "agent",
			"agent %q is not served: %v", name, err)}
	}
	a, ok := s.agents[name]
	if !ok {
		return nil, &api.AgentChoice{Asked: name, Served: s.names, Refusal: capsule.Refuse(capsule.CodeUnknownAgent, "agent",
			"no agent %q here; this daemon serves %v", name, s.names)}
	}
	return a, nil
}

// settlePlaces gives each agent of the embedded default the state of the
// directory it now works in: another directory's state is parked under
// state_dir/places, and this one's, parked earlier, comes back.
func (d *Daemon) settlePlaces(cfg *config.Config) error {
	for _, ac := range cfg.Agents {
		sw, err := place.Switch(cfg.AgentDir(ac.Name), filepath.Join(cfg.Daemon.StateDir, "places"), ac.Workdir)
		if err != nil {
			return fmt.Errorf("agent %s: %w", ac.Name, err)
		}
		if sw.Parked != "" {
			d.log.Info("this directory is another place: the agent's state for the last one is parked, not shown here",
				"agent", ac.Name, "workdir", ac.Workdir, "parked", sw.ParkedFrom, "to", sw.ParkedTo)
		}
		if sw.Restored != "" {
			d.log.Info("brought back the agent's state for this directory", "agent", ac.Name, "workdir", ac.Workdir, "from", sw.Restored)
		}
	}
	return nil
}
