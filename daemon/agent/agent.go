// Package agent is one served agent at run time and the operations on it:
// its residency, its event feed, the shippers that carry its log to the
// upstreams, its automatic capture, and Checkpoint, Resume, Wait, the
// capsule calls, Signal and the dead letter (ops.go). The HTTP handlers
// (daemon/api) and the MCP tools (daemon/mcpserver) are doors onto these
// operations, so each rule is enforced in one place.
package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/daemon/outbox"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/pacer"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/upstream"
)

// feedWindow is how many recent events an agent's wait feed keeps.
const feedWindow = 512

// Upstream is one configured upstream at run time, shared by every agent
// that ships to it: the client and its rate limit.
type Upstream struct {
	Cfg    config.Upstream // what it was built from (a reload compares)
	Client upstream.Upstream
	// Fleet is set for a fleet upstream (kind "nats"): the same client,
	// as what the agent asks of a fleet beside shipping.
	Fleet    Fleet
	Limiter  *rate.Limiter
	Coalesce bool
	Linger   time.Duration // the outbox gathers writes this long before a short batch
}

// Close releases the client's connections and sessions, for clients that
// hold any (Delx keeps MCP sessions).
func (ur *Upstream) Close() {
	if c, ok := ur.Client.(interface{ Close() error }); ok {
		c.Close()
	}
}

// Observer is told what the agent does, for the daemon's metrics.
type Observer interface {
	// Delivery is one delivery attempt to an upstream and its outcome.
	Delivery(upstream, outcome string, took time.Duration)
	// Accepted is a write stored durably; Signal a context signal.
	Accepted(agent, kind string)
	Signal(agent, kind string)
}

// Agent is one served agent at run time: its residency, its event feed, one
// shipper per upstream and, for upstreams that have one, a relay of their
// long poll. Data flows store → shippers → upstreams.
type Agent struct {
	name     string
	cfg      config.Agent
	dir      string
	store    *residency.Store
	feed     *events.Feed
	shippers []*outbox.Shipper
	ups      []*Upstream // same order as shippers
	log      *slog.Logger

	obs           Observer
	resumeTimeout time.Duration
	remoteMu      sync.Mutex
	remote        map[string]capsule.RemoteView // last view each upstream gave

	dirty chan struct{}    // buffered 1: the last-resume file is out of date
	modes statefiles.Modes // of its directory and last-resume file
	// lastResume is the last-resume file, rewritten after changes
	// (keepLastResume).
	lastResume *atomicfile.Slot

	capture *capture.Capture // the automatic side: watcher, handoff files, policy
	guard   *guard.Guard     // what the fleet holds passes it before it is imported (fleet.go)
	fleets  []*fleetLink     // its fleet upstreams (fleet.go)

	// Work snapshots (snapshots.go): the store, or why there is none.
	snaps SnapshotStore
	// versions is the store's version journal (history.go); nil: off,
	// or the store runs in its owner's worker.
	versions *snapshot.Versions
	snapErr  error
	// newestAtOpen is the store's newest snapshot as it opened, what
	// resume names while the start snapshot is under way.
	newestAtOpen snapshot.Snapshot
	views        viewCache    // what resume shows of the capture and the store (localview.go)
	ready        readyAnswers // resume's whole answer made ahead (readyanswer.go)
	fsnaps       *fleetSnaps  // shipping them to the fleet (fleetsnaps.go); nil: off

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// lastResumeEvery bounds how often the last-resume file is rewritten.
// Under a second: a busy agent's automatic records come min_interval
// apart, a second at least, and each then rewrites it in the wake-up
// that stored it instead of in one of its own a moment later.
const lastResumeEvery = 500 * time.Millisecond

// Options are what one agent runs with: the daemon's wiring builds them
// from the configuration, so this package never reads the whole of it.
type Options struct {
	// Config is the agent's own table: its name, workdir, upstreams and
	// who may use it (the API checks access against it; a reload compares).
	Config config.Agent
	Dir    string           // its state directory
	Modes  statefiles.Modes // of that directory and its last-resume file
	// Upstreams holds the run time of every upstream the agent names.
	Upstreams map[string]*Upstream
	// MaxPending bounds the writes no upstream has taken yet
	// (residency.Options.MaxPending).
	MaxPending int
	// Outbox holds the delivery timings (MinBackoff, MaxBackoff,
	// MaxRetryAfter, UnauthorizedRetry); the rest of each upstream's
	// outbox.Options Open fills in.
	Outbox outbox.Options
	// ResumeTimeout bounds asking the upstreams for their views in Resume.
	ResumeTimeout time.Duration
	// Snapshots opens the agent's work snapshot store (Workdir and Logger
	// are set by Open, and Dir when empty: STATE/agents/NAME/snapshots.git);
	// nil: snapshots are off or there is no workdir.
	Snapshots *snapshot.Options
	// OpenSnapshots opens the store; nil: snapshot.Open, in process. A
	// daemon running as root over another user's workdir opens it in
	// that owner's worker.
	OpenSnapshots OpenSnapshots
	// FleetWithhold are the patterns of files never shipped to the fleet
	// (snapshots.fleet_withhold).
	FleetWithhold []string
	// Capture is the agent's automatic side; Agent, Dir, Workdir, Store,
	// Guard and Logger are the agent's own and set by Open.
	Capture  capture.Options
	Guard    *guard.Guard
	Logger   *slog.Logger
	Observer Observer
}

// Open opens the agent's residency and prepares its shippers; Start runs
// them.
func Open(o Options) (*Agent, error) {
	ac, ups, g, log, obs := o.Config, o.Upstreams, o.Guard, o.Logger, o.Observer
	a := &Agent{name: ac.Name, cfg: ac, dir: o.Dir, feed: events.New(feedWindow), obs: obs, dirty: make(chan struct{}, 1),
		guard: g, log: log.With("agent", ac.Name), resumeTimeout: o.ResumeTimeout, remote: map[string]capsule.RemoteView{}}
	// An agent is its place: state that belongs to another workdir is
	// refused before anything of it is opened.
	if err := place.Check(ac.Name, a.dir, ac.Workdir); err != nil {
		return nil, err
	}
	store, err := residency.Open(residency.Options{
		Agent:      ac.Name,
		Dir:        a.dir,
		Upstreams:  ac.Upstreams,
		OnCommit:   a.onCommit,
		MaxPending: o.MaxPending,
	})
	if err != nil {
		return nil, err
	}
	switch rec := store.Recovery(); {
	case rec.Replayed > 0:
		a.log.Info("recovered writes the last run acknowledged but had not checkpointed", "records", rec.Replayed, "log", filepath.Join(a.dir, residency.WALFile))
	case rec.Foreign > 0:
		a.log.Warn("residency.db is new but a write-ahead log of an earlier one remains; its records were set aside", "records", rec.Foreign, "log", filepath.Join(a.dir, residency.WALFile))
	}
	if rec := store.Recovery(); rec.TornTail != "" {
		a.log.Info("write-ahead log: "+rec.TornTail, "log", filepath.Join(a.dir, residency.WALFile))
	} else if rec.Recreated {
		a.log.Info("write-ahead log was missing after a clean stop (nothing was in it); made a new one", "log", filepath.Join(a.dir, residency.WALFile))
	}
	a.store = store
	a.modes = o.Modes
	a.lastResume = atomicfile.NewSlot(filepath.Join(a.dir, statefiles.LastResumeName), a.modes.LastResume, false)
	if err := os.Chmod(a.dir, a.modes.Dir); err != nil {
		store.Close()
		return nil, err
	}
	co := o.Capture
	co.Agent, co.Dir, co.Workdir, co.Store, co.Guard, co.Logger = ac.Name, a.dir, ac.Workdir, store, g, log
	a.capture = capture.New(co)
	a.openSnapshots(o.Snapshots, o.OpenSnapshots)
	a.views.enabled = o.OpenSnapshots == nil // the store, if any, is in process
	for _, name := range ac.Upstreams {
		ur := ups[name]
		a.ups = append(a.ups, ur)
		oo := o.Outbox
		oo.Agent, oo.Store, oo.Upstream, oo.Upstreams = ac.Name, store, ur.Client, ac.Upstreams
		oo.Limiter, oo.Coalesce, oo.Logger, oo.Linger = ur.Limiter, ur.Coalesce, log, ur.Linger
		oo.OnAttempt = func(outcome string, d time.Duration) { obs.Delivery(name, outcome, d) }
		oo.OnDelivered = a.prepareAnswer
		oo.OnFailure = func(w capsule.Write, reason string) {
			a.feed.Publish(events.Event{Kind: "delivery_failed", Seq: w.Seq,
				Summary: "upstream " + name + " refused seq for good; kept in its dead letter: " + reason,
				Data:    map[string]any{"upstream": name, "seq": w.Seq, "error": reason}})
		}
		a.shippers = append(a.shippers, outbox.New(oo))
	}
	a.openFleets()
	a.openFleetSnaps(o.FleetWithhold, g, o.Snapshots)
	a.initReady()
	return a, nil
}

// onCommit runs on the store's writer goroutine after each commit: wake the
// shippers when the log grew and tell the wait callers. It never blocks.
func (a *Agent) onCommit(evs []residency.Event) {
	if countLogged(evs) <= 1 {
		// Writers arriving together (a batch of several) are no moment
		// for a resume: the answer is made ahead between lone writes.
		defer a.prepareAnswer()
	}
	logged := false
	out := make([]events.Event, 0, len(evs))
	for _, e := range evs {
		logged = logged || e.Logged
		if e.Origin == capsule.OriginExplicit && e.Kind == string(capsule.WriteCheckpoint) && a.capture != nil {
			a.capture.ExplicitCheckpoint()
			a.capture.Checkpointed(time.Now()) // its open work so far is settled
		}
		switch {
		case e.Kind == "signal" && e.Signal != nil:
			a.obs.Signal(a.name, e.Signal.Kind)
			if a.capture != nil {
				a.capture.Signal(e.Signal)
			}
		case e.Logged:
			a.obs.Accepted(a.name, e.Kind)
		}
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
	a.fleetTouch()
	select {
	case a.dirty <- struct{}{}:
	default:
	}
	a.feed.Publish(out...)
}

// keepLastResume rewrites the last-resume file after changes, at most once
// per lastResumeEvery (the first change after a quiet interval at once, in
// the wake-up of the write that made it), and once more on the way out.
func (a *Agent) keepLastResume(ctx context.Context) {
	a.writeLastResume()
	pacer.Run(ctx, a.dirty, lastResumeEvery, a.writeLastResume)
	a.writeLastResume()
}

// Start runs the shippers and the upstream relays until stop.
func (a *Agent) Start(ctx context.Context) {
	ctx, a.cancel = context.WithCancel(ctx)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.keepLastResume(ctx)
	}()
	go func() {
		defer a.wg.Done()
		a.prepareAnswers(ctx)
	}()
	if a.fsnaps != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.shipSnapshots(ctx)
		}()
	}
	a.capture.Start(ctx, &a.wg)
	a.startFleets(ctx)
	for i, s := range a.shippers {
		if !a.shipperHeld(s) {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				s.Run(ctx)
			}()
		}
		if w, ok := a.ups[i].Client.(upstream.Waiter); ok {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.relay(ctx, a.ups[i], w)
			}()
		}
	}
}

// Stop stops the shippers and relays and closes the residency.
func (a *Agent) Stop() error {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.snaps != nil {
		a.snaps.Close()
	}
	return a.store.Close() // idempotent
}

// Shipper returns the shipper for the named upstream, or nil.
func (a *Agent) Shipper(name string) *outbox.Shipper {
	for _, s := range a.shippers {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// Kick makes every shipper retry at once (a reload).
func (a *Agent) Kick() {
	for _, s := range a.shippers {
		s.Kick()
	}
}

// UpstreamStates is the agent's delivery state per upstream.
func (a *Agent) UpstreamStates() []capsule.UpstreamState {
	out := make([]capsule.UpstreamState, 0, len(a.shippers))
	for _, s := range a.shippers {
		out = append(out, s.State())
	}
	return out
}

// LocalResume is the resume document from what this daemon knows, without
// asking the upstreams: the residency, delivery, capture, work snapshot and
// fleet state. Status, the last-resume file and the fleet's state document
// are made from it; Resume adds the upstreams' own views.
func (a *Agent) LocalResume() capsule.Resume { return a.withLocal(a.store.Resume()) }

// withLocal adds to the residency's part of a resume what the rest of this
// daemon knows. ResumeJSON puts what it sets in the slots of the answer
// the residency keeps ready; a field set here that is not one of
// residency.LocalParts must send ResumeJSON to its full path (localOnly).
func (a *Agent) withLocal(r capsule.Resume) capsule.Resume {
	r.Upstreams = a.UpstreamStates() // moves with every write: read live
	a.view().fill(a, &r)
	a.markLostDone(&r)
	return r
}

// ResumeOptions say how Resume reads.
type ResumeOptions struct {
	// Local answers from this daemon's state alone: the upstreams' views
	// as last fetched, without calling them or waiting for their rate
	// limits (a SessionStart hook has half a second).
	Local bool
}

// Resume is the full resume document: the residency, the delivery state,
// and each upstream's own view (fetched within resumeTimeout; an upstream
// that does not answer in time is named in degraded and its last view, if
// any, is shown; with o.Local, the last views without asking). The Visit
// it returns is this read as the agent's visit: since_last_visit is reset
// only when the caller passes it to Visited, once the agent received the
// answer.
func (a *Agent) Resume(ctx context.Context, o ResumeOptions) (capsule.Resume, residency.Visit) {
	doc, visit := a.store.Visit()
	r := a.withLocal(doc)
	if !o.Local {
		r.Degraded = append(r.Degraded, a.fetchRemote(ctx)...)
	}
	a.addRemote(&r)
	return r, visit
}

// addRemote adds the upstreams' own views, as last fetched, to r.
func (a *Agent) addRemote(r *capsule.Resume) {
	a.remoteMu.Lock()
	defer a.remoteMu.Unlock()
	if len(a.remote) == 0 {
		return
	}
	r.Remote = map[string]capsule.RemoteView{}
	for name, v := range a.remote {
		r.Remote[name] = v
		var doc struct {
			Directions []json.RawMessage `json:"directions"`
		}
		if json.Unmarshal(v.Body, &doc) == nil {
			for _, d := range doc.Directions {
				r.Directions = append(r.Directions, withSource(name, "direction", d))
			}
		}
	}
}

// Visited resets since_last_visit to what the visit v was shown: call it
// once the agent has received the answer v came with.
func (a *Agent) Visited(v residency.Visit) {
	a.store.Visited(v)
	a.capture.Visited(v.At())
}

// fetchRemote asks every upstream with a view of its own for it, within
// resumeTimeout and the upstream's rate limit, and keeps what each
// answers; it returns the upstreams that did not answer in time.
func (a *Agent) fetchRemote(ctx context.Context) []string {
	var resumers []int
	for i, ur := range a.ups {
		if _, ok := ur.Client.(upstream.Resumer); ok {
			resumers = append(resumers, i)
		}
	}
	if len(resumers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.resumeTimeout)
	defer cancel()
	type got struct {
		name string
		body json.RawMessage
		err  error
	}
	ch := make(chan got, len(resumers))
	for _, i := range resumers {
		ur := a.ups[i]
		go func() {
			// A resume waits for the rate limit only within its bound; past
			// it the last view is shown and the upstream named degraded.
			if err := ur.Limiter.Wait(ctx); err != nil {
				ch <- got{name: ur.Client.Name(), err: err}
				return
			}
			body, err := ur.Client.(upstream.Resumer).Resume(ctx, a.name)
			ch <- got{ur.Client.Name(), body, err}
		}()
	}
	var degraded []string
	for range resumers {
		g := <-ch
		if g.err == nil && g.body != nil {
			// The door for an upstream's view: every string in it is
			// cleaned before it is held (see guard.RemoteJSON).
			g.body, g.err = guard.RemoteJSON(g.body)
		}
		switch {
		case g.err != nil:
			degraded = append(degraded, g.name)
		case g.body != nil:
			a.remoteMu.Lock()
			a.remote[g.name] = capsule.RemoteView{FetchedAt: time.Now().UTC(), Body: upstream.ValidUTF8(g.body)}
			a.remoteMu.Unlock()
		}
	}
	return degraded
}

// withSource is one direction or event from the upstream source, marked
// with it: an object gains (or has replaced) "source", anything else is
// wrapped as {"source": …, key: raw}. raw is already cleaned.
func withSource(source, key string, raw json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{key: raw}
	}
	obj["source"], _ = json.Marshal(source)
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}

// relay keeps one long poll open to the upstream for this agent and
// publishes what it returns to the agent's wait callers.
func (a *Agent) relay(ctx context.Context, ur *Upstream, w upstream.Waiter) {
	const maxSeconds = 90
	failures := 0
	for ctx.Err() == nil {
		if err := ur.Limiter.Wait(ctx); err != nil {
			return
		}
		raw, err := w.Wait(ctx, a.name, maxSeconds)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := time.Duration(rand.Int64N(int64(min(time.Second<<min(failures, 9), 5*time.Minute)))) + time.Second
			if failures == 1 {
				a.log.Warn("upstream long poll failed; retrying", "upstream", ur.Client.Name(), "err", err)
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		failures = 0
		var ans struct {
			Woke   string            `json:"woke"`
			Events []json.RawMessage `json:"events"`
		}
		if json.Unmarshal(raw, &ans) != nil || ans.Woke == "timeout" {
			continue
		}
		evs := ans.Events
		if len(evs) == 0 {
			evs = []json.RawMessage{raw}
		}
		// Each cleaned (guard.RemoteJSON), marked with its source and
		// bounded (events.Remote) before the feed holds it; the feed gives
		// an upstream's events way to the agent's own.
		remote := make([]events.Event, 0, len(evs))
		refused := 0
		for _, e := range evs {
			if len(e) <= events.MaxRemoteEvent { // one over the bound is only noted, never read
				clean, err := guard.RemoteJSON(e)
				if err != nil {
					refused++
					continue
				}
				e = withSource(ur.Client.Name(), "event", clean)
			}
			remote = append(remote, events.Remote(ur.Client.Name(), e))
		}
		if refused > 0 {
			a.log.Warn("upstream events refused: not JSON, or too many strings", "upstream", ur.Client.Name(), "refused", refused)
		}
		a.feed.Publish(remote...)
	}
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.name }

// Config is the agent's configuration.
func (a *Agent) Config() config.Agent { return a.cfg }

// Store is the agent's residency.
func (a *Agent) Store() *residency.Store { return a.store }

// Capture is the agent's automatic side.
func (a *Agent) Capture() *capture.Capture { return a.capture }
