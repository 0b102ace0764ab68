package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/daemon/fleetsnap"
	"github.com/continuityd/continuityd/daemon/outbox"
	"github.com/continuityd/continuityd/daemon/residency"
)

// The agent's side of its fleet upstreams (kind "nats"): its latest state is
// published to the fleet's bucket after writes; an agent whose residency is
// empty is restored from the fleet before it is served; another daemon
// writing the same agent is reported.

// Fleet is a fleet upstream as the agents and the daemon use it. A fleet is
// a two-way sync, which the one-way upstream.Upstream (that ships the
// writes, and which the same client implements) does not model: the
// fleet also gives an agent back on another machine, reports two daemons
// writing one agent, lists the agents it knows and carries work snapshots.
// The daemon's wiring sets it on the Upstream it builds (upstream/nats
// implements it); nothing here names the implementation.
type Fleet interface {
	// Restore reads what the fleet holds of agent: its latest state and
	// where its writes end. Replay calls apply with each of agent's writes
	// from log seq fromSeq on, in the fleet's order, each once; an error
	// from apply stops it and is returned.
	Restore(ctx context.Context, agent string) (*capsule.FleetState, error)
	Replay(ctx context.Context, agent string, fromSeq uint64, apply func(capsule.Write) error) error

	// PutState publishes agent's resume document if the fleet's copy is
	// still at revision lastRev (0: none yet, or this daemon's own), and
	// returns the new revision for the next call. When another daemon
	// writes the agent, nothing is written over either state and the
	// error is a *capsule.FleetConflictError (errors.Is
	// capsule.ErrFleetConflict); the revision is then non-zero when this
	// daemon's state went in (Held).
	PutState(ctx context.Context, agent string, doc json.RawMessage, lastRev uint64) (uint64, error)

	// Conflicts lists, for every agent, the other writer seen within the
	// conflict window. Release stops watching agent (it left this daemon):
	// another daemon writing it afterwards is no conflict of this one's.
	Conflicts() []capsule.FleetConflictError
	Release(agent string)

	// Take makes this daemon agent's writer in the fleet, writing doc over
	// the state of the daemon that wrote it (fleettake.go); it is refused
	// with a *capsule.FleetTakeError. Handover is the agent's latest
	// handover as far as it concerns this daemon (taken here, or given
	// away: then its state and writes are refused with
	// capsule.ErrFleetHandedOver), or nil.
	Take(ctx context.Context, agent string, doc json.RawMessage, force bool) (*capsule.FleetHandover, error)
	Handover(agent string) *capsule.FleetHandover

	// Agents lists every agent the fleet knows, by name; Health is the
	// connection as this daemon sees it (GET /v1/fleet).
	Agents(ctx context.Context) ([]capsule.FleetEntry, error)
	Health() capsule.FleetHealth

	// Machine names this daemon in the fleet; the work snapshots it ships
	// are signed with it.
	Machine() string
	// The fleet's snapshot bucket: work snapshots shipped and fetched,
	// and its name.
	fleetsnap.Bucket
	SnapshotBucket() string
}

// publishEvery bounds how often the state is put to the fleet's bucket.
const publishEvery = time.Second

// restoreRetryMax bounds the wait between restore attempts while the fleet
// is unreachable.
const restoreRetryMax = 30 * time.Second

// FleetInstance tells apart two daemons on one machine and stays the same
// across restarts of one: a short hash of its absolute state directory.
func FleetInstance(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// fleetLink is one fleet upstream of the agent.
type fleetLink struct {
	name    string
	c       Fleet
	ship    *outbox.Shipper // held (not run) until a pending restore is done
	timeout time.Duration
	window  time.Duration // conflict_window
	dirty   chan struct{} // buffered 1: the state changed since the last put

	mu        sync.Mutex
	rev       uint64 // the agent key's revision this daemon last wrote (or restored)
	pending   bool   // the residency was empty and the fleet has not answered yet
	restored  *capsule.RestoredFrom
	putSeq    uint64 // the seq of the last state put
	lastPutOK bool
}

func (fl *fleetLink) isPending() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.pending
}

func (fl *fleetLink) touch() {
	select {
	case fl.dirty <- struct{}{}:
	default:
	}
}

// openFleets finds the agent's fleet upstreams and, when its residency is
// empty, restores it from the first that answers within its timeout. An
// unanswered restore leaves the agent empty and degraded; Start retries it.
func (a *Agent) openFleets() {
	for i, ur := range a.ups {
		if ur.Fleet == nil {
			continue
		}
		// config sets both (more than zero) for every nats upstream.
		a.fleets = append(a.fleets, &fleetLink{name: ur.Client.Name(), c: ur.Fleet, ship: a.shippers[i],
			timeout: ur.Cfg.Timeout.Duration, window: ur.Cfg.ConflictWindow.Duration, dirty: make(chan struct{}, 1)})
	}
	if len(a.fleets) == 0 || !a.residencyEmpty() {
		return
	}
	for _, fl := range a.fleets {
		fl.pending = true
	}
	fl := a.fleets[0] // one fleet restores; the others hold the same writes
	ctx, cancel := context.WithTimeout(context.Background(), fl.timeout)
	defer cancel()
	if err := a.restoreUntil(ctx, fl); err != nil {
		a.log.Warn("the residency is empty and the fleet did not answer in time: starting empty (degraded); the state is restored when the fleet answers, keeping what is written meanwhile",
			"upstream", fl.name, "waited", fl.timeout, "err", err)
	}
}

// residencyEmpty: nothing was ever written here (a new machine, a new pod,
// a wiped state directory).
func (a *Agent) residencyEmpty() bool {
	r := a.store.Resume()
	return r.Seq == 0 && a.store.LogHead() == 0 && a.store.Capsule() == nil
}

// restoreUntil tries to restore from fl until it succeeds or ctx ends.
func (a *Agent) restoreUntil(ctx context.Context, fl *fleetLink) error {
	wait := 100 * time.Millisecond
	for {
		err := a.restoreFrom(ctx, fl)
		if err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// restoreFrom reads the agent from the fleet and imports it. On success
// every fleet link of the agent stops being pending.
func (a *Agent) restoreFrom(ctx context.Context, fl *fleetLink) error {
	r, err := fl.c.Restore(ctx, a.name)
	if err != nil {
		return err
	}
	var from *capsule.RestoredFrom
	if r.Found || r.LastSeq > 0 {
		door := fleetDoor{a: a, upstream: fl.name, machine: r.Machine}
		var st *capsule.Resume
		if r.Found && len(r.State) > 0 {
			st = door.state(r.State, r.Revision)
		}
		var writes []capsule.Write
		if r.LastSeq > r.Seq {
			err := fl.c.Replay(ctx, a.name, r.Seq+1, func(w capsule.Write) error {
				if door.write(&w) {
					writes = append(writes, w)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		res, err := a.store.Import(ctx, residency.Import{State: st, Writes: writes, SeqFloor: max(r.LastSeq, r.Seq),
			Refused: door.refused, RefusalOf: door.refusedOnReplay})
		if err != nil {
			return err
		}
		from = &capsule.RestoredFrom{Upstream: fl.name, Machine: r.Machine, Instance: r.Instance, At: r.At,
			AgeSeconds: int64(r.Age / time.Second), Revision: r.Revision, Seq: r.Seq, LastSeq: r.LastSeq,
			Replayed: res.Applied, Merged: res.Merged, RestoredAt: time.Now().UTC()}
		if r.Found && !r.Self && r.Age < fl.window {
			from.PreviousWriterRecent = true
		}
		a.log.Info("agent restored from the fleet", "upstream", fl.name, "machine", r.Machine, "state_seq", r.Seq,
			"last_seq", r.LastSeq, "replayed", res.Applied, "skipped", res.Skipped, "age", r.Age.Round(time.Second), "merged", res.Merged, "seq", res.Seq)
		if res.Merged {
			a.log.Warn("the fleet came back after writes were made here: they were kept, and the fleet filled in only what they had not set", "upstream", fl.name)
		}
		if from.PreviousWriterRecent || len(r.Conflicts) > 0 {
			a.log.Warn("the daemon that wrote this agent before may still be running; two daemons writing one agent are reported as a conflict",
				"upstream", fl.name, "machine", r.Machine, "age", r.Age.Round(time.Second))
		}
		a.feed.Publish(events.Event{Kind: "restored", Seq: res.Seq, Summary: "state restored from the fleet (upstream " + fl.name + ", machine " + r.Machine + ")",
			Data: from})
	} else {
		a.log.Info("the fleet has no state for this agent: starting new", "upstream", fl.name)
	}
	for _, f := range a.fleets {
		f.mu.Lock()
		f.pending = false
		if f == fl {
			f.restored = from
			if r.Found {
				f.rev = r.Revision
			}
		}
		f.mu.Unlock()
	}
	return nil
}

// fleetDoor is where what the fleet holds of the agent enters it: the
// state and the replayed writes pass the guard a local write passes
// (guard.CheckRemoteState, guard.CheckRemoteWrite); what fails is left
// out, logged and kept as a refusal naming the source, the machine that
// wrote it and the rule, for resume and status. What is left out is never
// stored, so it is never published onwards either.
type fleetDoor struct {
	a        *Agent
	upstream string
	machine  string // the writer of the state (cleaned by the fleet client)
	refused  []capsule.Refusal
}

// refuse records one refusal of the guard.
func (d *fleetDoor) refuse(source string, e *capsule.Error) {
	d.refused = append(d.refused, d.refusal(source, e))
}

// refusal logs one refusal and returns it.
func (d *fleetDoor) refusal(source string, e *capsule.Error) capsule.Refusal {
	d.a.log.Warn("refused what the fleet holds of this agent: it is not stored or published", "upstream", d.upstream,
		"source", source, "machine", d.machine, "rule", e.Code, "field", e.Field, "why", e.Message)
	return capsule.Refusal{Source: source, Machine: d.machine, Error: *e}
}

// state decodes the fleet's state document and keeps what passes, or nil
// when it is not a resume document at all (only the writes are replayed).
func (d *fleetDoor) state(raw json.RawMessage, revision uint64) *capsule.Resume {
	source := "fleet " + d.upstream + " state"
	if len(raw) > guard.MaxRemoteStateBytes {
		d.refuse(source, capsule.Refuse(capsule.CodeBodyTooLarge, "", "the state is %d bytes; the limit is %d", len(raw), guard.MaxRemoteStateBytes))
		return nil
	}
	st := &capsule.Resume{}
	if err := json.Unmarshal(raw, st); err != nil {
		d.refuse(source, capsule.Refuse(capsule.CodeInvalidJSON, "", "revision %d is not a resume document; only the writes after it are replayed", revision))
		return nil
	}
	for _, e := range d.a.guard.CheckRemoteState(st) {
		d.refuse(source, e)
	}
	return st
}

// refusedOnReplay names a write the residency refused on replay (the
// state did not allow it); the store keeps it with the import.
func (d *fleetDoor) refusedOnReplay(w capsule.Write, e *capsule.Error) capsule.Refusal {
	return d.refusal(d.writeSource(w), e)
}

// writeSource names a replayed write as a source of refusals.
func (d *fleetDoor) writeSource(w capsule.Write) string {
	return fmt.Sprintf("fleet %s write seq %d", d.upstream, w.Seq)
}

// write reports whether a replayed write passes; a refused one is skipped.
func (d *fleetDoor) write(w *capsule.Write) bool {
	if e := d.a.guard.CheckRemoteWrite(w); e != nil {
		d.refuse(d.writeSource(*w), e)
		return false
	}
	return true
}

// startFleets runs, per fleet upstream, the state publisher and, for a
// restore still pending, its retries; the held shippers start once the
// restore is done. Called by Start with the agent's context.
func (a *Agent) startFleets(ctx context.Context) {
	for _, fl := range a.fleets {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if fl.isPending() {
				if !a.retryRestore(ctx, fl) {
					return
				}
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				fl.ship.Run(ctx)
			}()
			a.publish(ctx, fl)
		}()
	}
}

// shipperHeld reports whether s waits for a fleet restore (Start skips it).
func (a *Agent) shipperHeld(s *outbox.Shipper) bool {
	for _, fl := range a.fleets {
		if fl.ship == s {
			return true
		}
	}
	return false
}

// retryRestore retries a pending restore with backoff until it is done (or
// another link did it) or ctx ends.
func (a *Agent) retryRestore(ctx context.Context, fl *fleetLink) bool {
	wait := time.Second
	for fl.isPending() {
		t := time.NewTimer(wait/2 + rand.N(wait/2))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if a.fleets[0] == fl {
			rctx, cancel := context.WithTimeout(ctx, fl.timeout)
			err := a.restoreFrom(rctx, fl)
			cancel()
			if err == nil {
				break
			}
		}
		wait = min(wait*2, restoreRetryMax)
	}
	return ctx.Err() == nil
}

// publish puts the agent's state to the fleet after changes, at most once
// per publishEvery, and once more on the way out.
func (a *Agent) publish(ctx context.Context, fl *fleetLink) {
	fl.touch() // the fleet learns of the agent at start
	for {
		select {
		case <-ctx.Done():
			// The last state, bounded: shutdown must not wait on a dead fleet.
			pctx, cancel := context.WithTimeout(context.Background(), min(fl.timeout, 2*time.Second))
			a.putState(pctx, fl, false)
			cancel()
			return
		case <-fl.dirty:
		}
		if !a.putState(ctx, fl, false) {
			// The fleet did not take it: try again later.
			time.AfterFunc(2*time.Second, fl.touch)
		}
		t := time.NewTimer(publishEvery)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// putState writes the agent's resume document to the fleet's bucket. It
// reports whether the fleet has this daemon's latest state (or its conflict
// key does).
func (a *Agent) putState(ctx context.Context, fl *fleetLink, always bool) bool {
	r := a.LocalResume()
	fl.mu.Lock()
	rev, same := fl.rev, fl.putSeq == r.Seq && fl.lastPutOK
	fl.mu.Unlock()
	if same && !always {
		return true
	}
	r.RestoredFrom = fl.restoredFrom()
	doc, err := json.Marshal(r)
	if err != nil {
		a.log.Error("fleet: cannot encode the state", "err", err)
		return true
	}
	newRev, err := fl.c.PutState(ctx, a.name, doc, rev)
	switch {
	case err == nil:
	case errors.Is(err, capsule.ErrFleetConflict), errors.Is(err, capsule.ErrFleetHandedOver):
		// Reported (once per episode) through the client's OnConflict or
		// OnHandover; a handed-over agent's state is put no more.
	default:
		if ctx.Err() == nil {
			a.log.Debug("fleet: state not put; retrying", "upstream", fl.name, "err", err)
		}
		fl.mu.Lock()
		fl.lastPutOK = false
		fl.mu.Unlock()
		return false
	}
	fl.mu.Lock()
	if newRev != 0 {
		fl.rev = newRev
	}
	fl.putSeq, fl.lastPutOK = r.Seq, true
	fl.mu.Unlock()
	return true
}

func (fl *fleetLink) restoredFrom() *capsule.RestoredFrom {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.restored == nil {
		return nil
	}
	c := *fl.restored
	return &c
}

// fleetTouch marks the state changed for the fleet publishers (onCommit).
func (a *Agent) fleetTouch() {
	for _, fl := range a.fleets {
		fl.touch()
	}
}

// FleetConflict reports another daemon writing this agent through the
// fleet upstream as a fleet_conflict event. The fleet client calls it once
// per episode (and logs it), from its own goroutine; it never blocks.
func (a *Agent) FleetConflict(upstream string, ce capsule.FleetConflictError) {
	a.feed.Publish(events.Event{Kind: "fleet_conflict", Seq: ce.Seq,
		Summary: "another daemon (machine " + ce.Machine + ") is writing this agent through upstream " + upstream,
		Data:    ce})
}

// FleetConflicts are the other writers of this agent the fleet upstreams
// see now (for resume, status and the metric).
func (a *Agent) FleetConflicts() []capsule.FleetConflict {
	var out []capsule.FleetConflict
	for _, fl := range a.fleets {
		for _, ce := range fl.c.Conflicts() {
			if ce.Agent == a.name {
				out = append(out, capsule.FleetConflict{Upstream: fl.name, Machine: ce.Machine, Instance: ce.Instance,
					Held: ce.Held, Seq: ce.Seq, At: ce.At})
			}
		}
	}
	return out
}

// FleetDegraded names the fleet upstreams whose restore is still pending.
func (a *Agent) FleetDegraded() []string {
	var out []string
	for _, fl := range a.fleets {
		if fl.isPending() {
			out = append(out, fl.name)
		}
	}
	return out
}

// FleetUpstreams names the agent's fleet upstreams.
func (a *Agent) FleetUpstreams() []string {
	var out []string
	for _, fl := range a.fleets {
		out = append(out, fl.name)
	}
	return out
}

// fleetResume adds what the fleet says to a resume document.
func (a *Agent) fleetResume(r *capsule.Resume) {
	if len(a.fleets) == 0 {
		return
	}
	r.Degraded = append(r.Degraded, a.FleetDegraded()...)
	r.FleetConflict = a.FleetConflicts()
	if r.FleetHandover = a.FleetHandover(); r.FleetHandover != nil && r.FleetHandover.Here == capsule.HandoverGiven {
		r.Degraded = append(r.Degraded, r.FleetHandover.Upstream)
	}
	for _, fl := range a.fleets {
		if from := fl.restoredFrom(); from != nil {
			r.RestoredFrom = from
			break
		}
	}
}
