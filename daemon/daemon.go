// Package daemon is continuityd's runtime: it opens each agent's residency,
// starts the shippers that carry accepted writes to the upstreams, and
// serves the local API on the Unix socket (and, when configured, a loopback
// TCP listener that requires a token).
//
// Data flows one way: sources (the local API; later watchers, hooks and
// transcripts) → residency (durable) → outbox → upstream clients.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/time/rate"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/safesocket"
	"github.com/continuityd/continuityd/upstream"
	"github.com/continuityd/continuityd/upstream/local"
)

// Options are the daemon's run-time collaborators.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Ready, when set, is called once the socket listens (systemd readiness).
	Ready func()
}

// Daemon serves a set of agents. Build it with New, then call Run.
type Daemon struct {
	cfg     *config.Config
	log     *slog.Logger
	version string
	ready   func()
	guard   *capsule.Guard
	started time.Time

	agents map[string]*agent
	names  []string // config order

	apiToken string // for the loopback listener; "" when there is none
}

// New checks what can be checked before anything is opened: the guard's
// rule set and the upstream kinds.
func New(cfg *config.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g, err := capsule.NewGuard(capsule.GuardOptions{AllowedLinkDomains: cfg.Guard.AllowedLinkDomains})
	if err != nil {
		return nil, fmt.Errorf("build guards: %w", err)
	}
	return &Daemon{cfg: cfg, log: opts.Logger, version: opts.Version, ready: opts.Ready, guard: g, agents: map[string]*agent{}}, nil
}

// Run opens every agent, serves the API until ctx ends, then shuts down:
// the listeners close, in-flight requests get the shutdown timeout, the
// shippers stop and every residency is closed. Everything accepted is
// already on disk, so nothing is lost by stopping.
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.started = time.Now().UTC()
	ups, err := d.buildUpstreams()
	if err != nil {
		return err
	}
	defer func() {
		for _, name := range d.names {
			if cerr := d.agents[name].stop(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	for _, ac := range d.cfg.Agents {
		a, err := openAgent(d.cfg, ac, ups, d.log)
		if err != nil {
			return err
		}
		d.agents[ac.Name], d.names = a, append(d.names, ac.Name)
	}

	mode, err := socketMode(d.cfg.Daemon.SocketMode)
	if err != nil {
		return err
	}
	ln, err := safesocket.Listen(d.cfg.Daemon.Socket, mode)
	if err != nil {
		return err
	}
	listeners := []net.Listener{ln}
	if d.cfg.Daemon.Listen != "" {
		tok, err := loadOrCreateToken(d.cfg.Daemon.StateDir)
		if err != nil {
			ln.Close()
			return err
		}
		d.apiToken = tok
		tln, err := net.Listen("tcp", d.cfg.Daemon.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("daemon.listen %s: %w", d.cfg.Daemon.Listen, err)
		}
		listeners = append(listeners, tln)
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	for _, name := range d.names {
		d.agents[name].start(runCtx)
	}

	servers := make([]*http.Server, len(listeners))
	serveErr := make(chan error, len(listeners))
	var wg sync.WaitGroup
	for i, l := range listeners {
		h := d.handler()
		if i > 0 { // the loopback TCP listener
			h = d.requireToken(h)
		}
		servers[i] = &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			// Long polls end with the run context, so Shutdown does not wait on
			// them for the whole shutdown timeout.
			BaseContext: func(net.Listener) context.Context { return runCtx },
			ErrorLog:    slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := servers[i].Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
	}
	d.log.Info("continuityd listening", "socket", d.cfg.Daemon.Socket, "listen", d.cfg.Daemon.Listen,
		"state_dir", d.cfg.Daemon.StateDir, "agents", d.names, "version", d.version)
	if d.ready != nil {
		d.ready()
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		d.log.Error("listener failed", "err", err)
	}
	d.log.Info("shutting down")
	cancelRun()
	shutCtx, cancel := context.WithTimeout(context.Background(), d.cfg.Daemon.ShutdownTimeout.Duration)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(shutCtx); serr != nil {
			d.log.Warn("shutdown: requests still running were cut", "err", serr)
			s.Close()
		}
	}
	wg.Wait()
	return err
}

// buildUpstreams makes one client and one rate limiter per upstream the
// agents use; agents that share an upstream share its limit.
func (d *Daemon) buildUpstreams() (map[string]*upstreamRuntime, error) {
	ups := map[string]*upstreamRuntime{}
	for _, ac := range d.cfg.Agents {
		for _, name := range ac.Upstreams {
			if _, ok := ups[name]; ok {
				continue
			}
			uc, ok := d.cfg.UpstreamFor(name)
			if !ok {
				return nil, fmt.Errorf("agent %s: unknown upstream %q", ac.Name, name)
			}
			up, coalesce, err := d.newUpstream(name, uc)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: %w", name, err)
			}
			ups[name] = &upstreamRuntime{up: up, coalesce: coalesce,
				limiter: rate.NewLimiter(rate.Limit(uc.Rate), max(uc.Burst, 1))}
		}
	}
	return ups, nil
}

// newUpstream builds the client for one upstream, and says whether its
// outbox coalesces runs of state-only checkpoints (only where each call
// costs: the local archive keeps every write).
func (d *Daemon) newUpstream(name string, uc config.Upstream) (upstream.Upstream, bool, error) {
	switch uc.Kind {
	case config.KindLocal:
		return local.New(name, d.cfg.AgentDir), false, nil
	default:
		return nil, false, fmt.Errorf("kind %q is not available in this build yet", uc.Kind)
	}
}

func socketMode(s string) (fs.FileMode, error) {
	if s == "" {
		return 0o600, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("daemon.socket_mode %q: %w", s, err)
	}
	return fs.FileMode(m), nil
}

// agentFor picks the agent a request names, or the only one.
func (d *Daemon) agentFor(name string) (*agent, *capsule.Error) {
	if name == "" {
		if len(d.names) == 1 {
			return d.agents[d.names[0]], nil
		}
		return nil, capsule.Refuse(capsule.CodeAgentRequired, "agent",
			"this daemon serves %d agents (%v); name one with ?agent=", len(d.names), d.names)
	}
	a, ok := d.agents[name]
	if !ok {
		return nil, capsule.RefuseStatus(http.StatusNotFound, capsule.CodeUnknownAgent, "agent",
			"no agent %q here; this daemon serves %v", name, d.names)
	}
	return a, nil
}

// loadOrCreateToken returns the loopback API token, creating it (mode 0600)
// on first use.
func loadOrCreateToken(stateDir string) (string, error) {
	path := stateDir + string(os.PathSeparator) + "api.token"
	if b, err := os.ReadFile(path); err == nil {
		return string(trimSpace(b)), nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", err
	}
	tok := randomToken()
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write api token: %w", err)
	}
	return tok, nil
}
