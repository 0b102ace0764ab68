package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/internal/ops"
)

// The places: every project a session reports from (a hook, an MCP
// client, a client command, each with its directory) is adopted as a
// place of its own (package place) and served as an agent of its own
// beside the configured ones, while it is watched. At most [places]
// max_watched are watched at once, and one idle for idle_after is
// unwatched (its agent stopped, its state kept) until its next session.
// Run's goroutine is the one that builds and stops agents, so adopting
// or watching a place again is asked of it (adopts), like a reload.

// IdleAfterEnv is a test hook: a Go duration that stands for [places]
// idle_after, without its lower bound of a minute, so an end-to-end test
// sees a place unwatched without waiting that long.
const IdleAfterEnv = "CONTINUITYD_TEST_IDLE_AFTER"

// placeSet is the daemon's places: the registry on disk, the rules of
// adoption, and which are watched now.
type placeSet struct {
	reg   *place.Registry
	rules place.Rules
	max   int
	idle  time.Duration

	mu      sync.Mutex
	watched map[string]time.Time // place name → its last session
}

// placeRequest asks Run to watch the place name (its agent opened and
// started), answered on done once it is served.
type placeRequest struct {
	name string
	done chan error
}

// openPlaces reads the registry of cfg's state directory, registers as
// places the state no configured agent has (nothing is orphaned), and
// watches again the places a session reported from within idle_after,
// the most recent first, up to max_watched.
func (d *Daemon) openPlaces(cfg *config.Config) (*placeSet, error) {
	reg, err := place.OpenRegistry(cfg.Daemon.StateDir, d.log)
	if err != nil {
		return nil, err
	}
	configured := func(name string) bool { _, ok := cfg.Agent(name); return ok }
	added, err := reg.Rescan(configured, time.Now())
	if err != nil {
		return nil, fmt.Errorf("places: %w", err)
	}
	for _, e := range added {
		d.log.Info("state no configured agent has is a place now, served again at its next session", "place", e.Name, "workdir", e.Workdir)
	}
	ps := &placeSet{reg: reg, max: cfg.Places.MaxWatched, idle: cfg.Places.IdleAfter.Duration, watched: map[string]time.Time{}}
	if v, err := time.ParseDuration(os.Getenv(IdleAfterEnv)); err == nil && v > 0 {
		ps.idle = v
	}
	roots := cfg.Places.RootsFor
	ps.rules = place.Rules{Adopt: cfg.Places.Adopt, Roots: roots, Home: homeOf}
	return ps, nil
}

// watchAtStart watches again the places a session reported from within
// idle_after, the most recent first, up to max_watched. Run calls it once
// the socket serves: fifty places opened before it took seconds in which
// nothing answered. They are opened and started side by side (opening.go);
// a request for one of them meanwhile waits on Run's goroutine as an
// adoption does. It returns once each is watched (its start snapshot, the
// catch-up of what changed while the daemon was down, goes on after).
func (d *Daemon) watchAtStart(ctx context.Context) {
	ps := d.places
	if ps == nil || !ps.rules.Adopt {
		return
	}
	began := time.Now()
	recent := slices.DeleteFunc(ps.reg.Places(), func(e place.Entry) bool { return began.Sub(e.Session) > ps.idle })
	if len(recent) == 0 {
		return
	}
	slices.SortFunc(recent, func(a, b place.Entry) int { return b.Session.Compare(a.Session) })
	ps.mu.Lock()
	for _, e := range recent[:min(len(recent), ps.max)] {
		ps.watched[e.Name] = e.Session
	}
	ps.mu.Unlock()
	started, err := d.rebuild()
	if err != nil {
		d.log.Error("places could not be opened", "err", err)
	}
	startAll(ctx, started)
	names := make([]string, 0, len(started))
	for _, a := range started {
		names = append(names, a.Config().Name)
	}
	d.log.Info("places watched again", "places", names, "took", time.Since(began).Round(time.Millisecond))
}

// homeOf is the home directory of uid ("" when unknown).
func homeOf(uid uint32) string {
	if int(uid) == os.Geteuid() {
		if h, err := os.UserHomeDir(); err == nil {
			return h
		}
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// withPlaces is base with the watched places added as agents, each
// delivering to the local archive, and the names of those agents. A place
// whose workdir or name is a configured agent's is left out: configured
// agents win (and take over its state, Inherit).
func (d *Daemon) withPlaces(base *config.Config) (*config.Config, map[string]bool) {
	names := map[string]bool{}
	d.placeNames = names // for build, on Run's goroutine too
	ps := d.places
	if ps == nil {
		return base, names
	}
	taken := map[string]bool{}
	for _, ac := range base.Agents {
		taken[ac.Name] = true
		if ac.Workdir != "" {
			taken["\x00"+place.Canonical(ac.Workdir)] = true
		}
	}
	cfg := *base
	cfg.Agents = slices.Clone(base.Agents)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, e := range ps.reg.Places() {
		if _, ok := ps.watched[e.Name]; !ok || taken[e.Name] || taken["\x00"+e.Workdir] {
			continue
		}
		cfg.Agents = append(cfg.Agents, config.Agent{Name: e.Name, Workdir: e.Workdir, Upstreams: []string{config.KindLocal},
			Transcript: config.TranscriptAuto})
		names[e.Name] = true
	}
	return &cfg, names
}

// AgentFor picks the agent a request names, or the one whose workdir
// holds cwd; a cwd in no agent's workdir adopts its project as a place
// (or watches it again), when the caller may (api.PlaceRuntime).
func (d *Daemon) AgentFor(ctx context.Context, name, cwd string) (*agent.Agent, *guard.Guard, error) {
	uid, ok := api.Caller(ctx)
	if !ok {
		uid = uint32(os.Geteuid())
	}
	return d.agentAs(ctx, name, cwd, uid)
}

// agentAs is AgentFor for the user uid.
func (d *Daemon) agentAs(ctx context.Context, name, cwd string, uid uint32) (*agent.Agent, *guard.Guard, error) {
	st := d.snap()
	a, choice := st.agentFor(name, cwd)
	if choice == nil {
		d.places.touch(st, a.Config().Name)
		return a, st.guard, nil
	}
	if d.places == nil {
		return nil, nil, choice
	}
	if name != "" && choice.Refusal.Code == capsule.CodeUnknownAgent {
		// A place not watched now, named: watched again, for whoever may
		// adopt its directory.
		e, ok := d.places.reg.Get(name)
		if !ok {
			return nil, nil, choice
		}
		cwd = e.Workdir
	} else if choice.Reason == "" {
		return nil, nil, choice
	}
	dir, err := d.places.rules.Where(cwd, uid)
	if err != nil {
		var np *place.NoPlaceError
		if errors.As(err, &np) && np.Forbidden {
			return nil, nil, capsule.Refuse(capsule.CodeAgentForbidden, "cwd", "%s", np.Reason)
		}
		return nil, nil, d.noPlace(st, choice, err.Error())
	}
	pname, err := d.adopt(ctx, st, dir)
	if err != nil {
		return nil, nil, err
	}
	st = d.snap()
	a, choice = st.agentFor(pname, "")
	if choice != nil {
		return nil, nil, choice
	}
	return a, st.guard, nil
}

// noPlace is the refusal for a cwd in no place: why, the places there
// are, and how to name one.
func (d *Daemon) noPlace(st *snapshot, choice *api.AgentChoice, why string) *api.AgentChoice {
	served := slices.Clone(st.names)
	for _, e := range d.places.reg.Places() {
		if !slices.Contains(served, e.Name) {
			served = append(served, e.Name)
		}
	}
	list := "none yet"
	if len(served) > 0 {
		list = quoteNames(served)
	}
	choice.Served, choice.Reason = served, why
	choice.Refusal = capsule.Refuse(capsule.CodeAgentRequired, "agent", "%s; the places and agents here: %s; name one with ?agent=", why, list)
	return choice
}

// quoteNames is names quoted and comma-separated.
func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// adopt makes dir a place (or finds the place it is) and has Run watch
// it; it returns the place's name once its agent is served.
func (d *Daemon) adopt(ctx context.Context, st *snapshot, dir string) (string, error) {
	owner, _ := place.OwnerOf(dir)
	taken := func(name string) bool { _, ok := st.base.Agent(name); return ok }
	e, err := d.places.reg.Add(dir, owner, taken, time.Now())
	if err != nil {
		return "", capsule.Refuse(capsule.CodeInternal, "cwd", "%s could not be adopted as a place: %v", dir, err)
	}
	req := placeRequest{name: e.Name, done: make(chan error, 1)}
	select {
	case d.adopts <- req:
	case <-d.notServing:
		return "", capsule.Refuse(capsule.CodeShuttingDown, "", "the daemon is stopping")
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return "", capsule.Refuse(capsule.CodeInternal, "cwd", "the place %s (%s) could not be opened: %v", e.Name, dir, err)
		}
		return e.Name, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// servePlace is a placeRequest, served by Run's goroutine: the place is
// watched (another, idle the longest, unwatched when max_watched are),
// answered once its agent is in the running snapshot, and started after
// (its watcher's walk and start snapshot do not hold up the answer).
func (d *Daemon) servePlace(ctx context.Context, req placeRequest) {
	old := d.snap()
	if old.agents[req.name] != nil || old.damaged[req.name] != nil {
		req.done <- nil
		return
	}
	if evicted := d.places.watch(req.name, time.Now()); len(evicted) > 0 {
		d.log.Info("places unwatched to stay within [places] max_watched; their state is kept", "places", evicted, "max_watched", d.places.max)
	}
	started, err := d.rebuild()
	if err != nil {
		d.log.Error("a place could not be opened", "place", req.name, "err", err)
	}
	if st := d.snap(); st.agents[req.name] == nil && st.damaged[req.name] == nil && err == nil {
		err = fmt.Errorf("the place %s was not opened", req.name)
	}
	req.done <- err
	for _, a := range started {
		d.log.Info("place watched", "place", a.Config().Name, "workdir", a.Config().Workdir)
	}
	startAll(ctx, started)
}

// unwatchIdle stops the agents of the places no session reported from
// for idle_after; their state stays, and their next session watches them
// again.
func (d *Daemon) unwatchIdle(ctx context.Context) {
	ps := d.places
	st := d.snap()
	cut := time.Now().Add(-ps.idle)
	ps.mu.Lock()
	var idle []string
	for name, last := range ps.watched {
		if a := st.agents[name]; a != nil && a.Capture().StartSnapshotRunning() {
			continue // not idle until its tree is snapshotted: that would start over
		}
		if last.Before(cut) {
			idle = append(idle, name)
			delete(ps.watched, name)
		}
	}
	ps.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	slices.Sort(idle)
	if _, err := d.rebuild(); err != nil {
		d.log.Error("places unwatched with errors", "err", err)
	}
	if err := ps.reg.Save(); err != nil {
		d.log.Warn("the places' registry could not be written", "err", err)
	}
	d.log.Info("idle places unwatched; their state is kept and their next session watches them again", "places", idle, "idle_after", ps.idle)
}

// idleEvery is how often Run looks for idle places.
func (ps *placeSet) idleEvery() time.Duration {
	return min(max(ps.idle/4, 10*time.Millisecond), time.Minute)
}

// rebuild builds the running snapshot again from its configuration and
// the places watched now: agents of places no longer watched stop, those
// of places watched now are opened and returned, to be started.
func (d *Daemon) rebuild() ([]*agent.Agent, error) {
	old := d.snap()
	cfg, names := d.withPlaces(old.base)
	next, err := d.build(cfg, old)
	next.base, next.places = old.base, names
	d.st.Store(next)
	next.logDamaged(d.log)
	var started []*agent.Agent
	for _, name := range next.names {
		if a := next.agents[name]; old.agents[name] != a {
			started = append(started, a)
		}
	}
	var removed []string
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
	d.stopIdleWorkers()
	return started, err
}

// watch marks name watched, as of a session at now, and unwatches the
// places idle the longest past max_watched, which it returns.
func (ps *placeSet) watch(name string, now time.Time) []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.watched[name] = now
	ps.reg.Touch(name, now)
	var evicted []string
	for len(ps.watched) > ps.max {
		oldest := ""
		for n, t := range ps.watched {
			if n != name && (oldest == "" || t.Before(ps.watched[oldest])) {
				oldest = n
			}
		}
		if oldest == "" {
			break
		}
		delete(ps.watched, oldest)
		evicted = append(evicted, oldest)
	}
	return evicted
}

// touch notes a session in the place name, when it is one (st's).
func (ps *placeSet) touch(st *snapshot, name string) {
	if ps == nil || !st.places[name] {
		return
	}
	now := time.Now()
	ps.mu.Lock()
	if _, ok := ps.watched[name]; ok {
		ps.watched[name] = now
	}
	ps.mu.Unlock()
	ps.reg.Touch(name, now)
}

// inherit gives the configured agent ac the state its workdir has under
// another name (an adopted place, an agent renamed), when it has none of
// its own.
func (d *Daemon) inherit(ac config.Agent, base *config.Config) {
	if d.places == nil || ac.Workdir == "" {
		return
	}
	configured := func(name string) bool { _, ok := base.Agent(name); return ok }
	from, err := d.places.reg.Inherit(ac.Name, ac.Workdir, configured, time.Now())
	switch {
	case err != nil:
		d.log.Error("the state this agent's workdir has under another name could not be taken over", "agent", ac.Name, "err", err)
	case from != "":
		d.places.mu.Lock()
		delete(d.places.watched, from)
		d.places.mu.Unlock()
		d.log.Info("the agent takes over its workdir's state, snapshots and history", "agent", ac.Name, "from", from, "workdir", ac.Workdir)
	}
}

// placesStatus are the places, the moves and the inotify watches, for
// status.
func (d *Daemon) placesStatus(st *snapshot, out *api.Status) {
	if ps := d.places; ps != nil {
		for _, e := range ps.reg.Places() {
			p := ops.PlaceStatus{Name: e.Name, Workdir: e.Workdir, Adopted: e.Adopted, Watched: st.agents[e.Name] != nil && st.places[e.Name]}
			if !e.Session.IsZero() {
				p.LastSession = &e.Session
			}
			out.Places = append(out.Places, p)
		}
		for _, m := range ps.reg.Moves() {
			out.Moved = append(out.Moved, ops.PlaceMove(m))
		}
	}
	use := &ops.WatchUse{Limit: inotifyLimit()}
	for _, w := range d.watches.running() {
		use.InUse += w.Stats().WatchedDirs
	}
	out.Watches = use
}

// inotifyLimit is the system's limit of inotify watches per user (0 when
// not known).
func inotifyLimit() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// placeConfig is the configuration of the place name as an agent, for a
// place not watched now (AgentConfig).
func (d *Daemon) placeConfig(name string) (config.Agent, bool) {
	if d.places == nil {
		return config.Agent{}, false
	}
	e, ok := d.places.reg.Get(name)
	if !ok {
		return config.Agent{}, false
	}
	return config.Agent{Name: e.Name, Workdir: e.Workdir, Upstreams: []string{config.KindLocal}, Transcript: config.TranscriptAuto}, true
}
