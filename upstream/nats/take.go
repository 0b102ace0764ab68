package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// Handing an agent over (`continuityd fleet take`): a daemon whose
// machine replaces a dead one writes the agent's key over the old
// writer's state at the revision it read (compare-and-set: of two takers
// at once, one wins), with a handover marker in the envelope, then keeps
// the handover under the key AGENT.taken for whoever looks later. The
// old writer, if it comes back, finds it (its watcher, or its first write
// of the key) and stops writing the agent instead of keeping its state
// apart as in a conflict: the take was deliberate.
//
// A handover concerns a daemon that is not its taker and whose view of
// the agent is older than the take (the revisions it took on end before
// it): a daemon that restored the agent from the fleet after the take,
// or that writes its key again since, took on what the taker wrote.

// handoverRecord is the value of AGENT.taken, and the marker in the
// envelope the take wrote (there without Revision: the entry's is it).
type handoverRecord struct {
	V            int       `json:"v"`
	Agent        string    `json:"agent"`
	FromMachine  string    `json:"from_machine,omitempty"`
	FromInstance string    `json:"from_instance,omitempty"`
	FromAt       time.Time `json:"from_at,omitzero"`
	ToMachine    string    `json:"to_machine"`
	ToInstance   string    `json:"to_instance,omitempty"`
	At           time.Time `json:"at"`
	Revision     uint64    `json:"revision,omitempty"`
	Seq          uint64    `json:"seq"`
	Forced       bool      `json:"forced,omitempty"`
}

// clean cleans the names another daemon wrote, as decodeEnvelope does.
func (h *handoverRecord) clean() {
	for _, s := range []*string{&h.Agent, &h.FromMachine, &h.FromInstance, &h.ToMachine, &h.ToInstance} {
		*s = guard.CleanRemoteName(*s)
	}
}

func takenKey(agent string) string { return agent + ".taken" }

// view is the handover as daemon me sees it.
func (h *handoverRecord) view(upstream string, here string) capsule.FleetHandover {
	v := capsule.FleetHandover{Upstream: upstream, Agent: h.Agent, Here: here,
		FromMachine: h.FromMachine, FromInstance: h.FromInstance, FromAt: h.FromAt,
		To: writerID(h.ToMachine, h.ToInstance), ToMachine: h.ToMachine, ToInstance: h.ToInstance,
		At: h.At, Revision: h.Revision, Seq: h.Seq, Forced: h.Forced}
	if h.FromMachine != "" {
		v.From = writerID(h.FromMachine, h.FromInstance)
	}
	return v
}

// Handover is the agent's latest handover as far as it concerns this
// daemon (Here "taken": this daemon took it; "given": it was taken from
// this daemon, which writes it no more), or nil.
func (c *Client) Handover(agent string) *capsule.FleetHandover {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handoverLocked(c.agents[agent])
}

// handoverLocked is Handover with c.mu held.
func (c *Client) handoverLocked(st *agentState) *capsule.FleetHandover {
	if st == nil || st.handover == nil {
		return nil
	}
	h := st.handover
	var v capsule.FleetHandover
	switch {
	case c.isSelf(h.ToMachine, h.ToInstance):
		v = h.view(c.o.Name, capsule.HandoverTaken)
	case st.base < h.Revision:
		v = h.view(c.o.Name, capsule.HandoverGiven)
	default:
		return nil // this daemon took on what the taker wrote since
	}
	return &v
}

// givenAway returns the handover that took agent from this daemon, or nil,
// reading the fleet's record once per agent first.
func (c *Client) givenAway(ctx context.Context, agent string) *capsule.FleetHandover {
	c.loadHandover(ctx, agent, c.state(agent, 0))
	if h := c.Handover(agent); h != nil && h.Here == capsule.HandoverGiven {
		return h
	}
	return nil
}

// loadHandover reads the agent's handover record, and whether this daemon
// holds the agent's key (then it writes the agent, whatever the record
// says), once per agent; the watcher follows both afterwards. Best effort:
// a read that fails is tried again at the next call.
func (c *Client) loadHandover(ctx context.Context, agent string, st *agentState) {
	if st == nil {
		return // released
	}
	c.mu.Lock()
	loaded := st.handoverLoaded
	c.mu.Unlock()
	if loaded {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	rec, err := c.readHandover(ctx, agent)
	if err != nil {
		return
	}
	var heldRev uint64
	e, err := c.kv.Get(ctx, agent)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return
	default:
		if env, derr := decodeEnvelope(e.Value()); derr == nil && env.writer() == c.me() {
			heldRev = e.Revision()
		}
	}
	c.mu.Lock()
	st.handoverLoaded = true
	st.base = max(st.base, heldRev)
	c.mu.Unlock()
	if rec != nil {
		c.noteHandover(agent, rec)
	}
}

// readHandover reads AGENT.taken (nil: none).
func (c *Client) readHandover(ctx context.Context, agent string) (*handoverRecord, error) {
	e, err := c.kv.Get(ctx, takenKey(agent))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeHandover(e.Value())
}

func decodeHandover(b []byte) (*handoverRecord, error) {
	var h handoverRecord
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	if h.ToMachine == "" || h.Revision == 0 {
		return nil, errors.New("not a handover record")
	}
	h.clean()
	return &h, nil
}

// noteHandover records a handover seen (the newest wins) and, the first
// time one takes the agent from this daemon, says so.
func (c *Client) noteHandover(agent string, h *handoverRecord) {
	c.mu.Lock()
	st := c.agents[agent]
	if st == nil || (st.handover != nil && st.handover.Revision > h.Revision) {
		c.mu.Unlock()
		return
	}
	st.handover = h
	v := c.handoverLocked(st)
	first := v != nil && v.Here == capsule.HandoverGiven && st.warnedRev != h.Revision
	if first {
		st.warnedRev = h.Revision
		st.holding = false
		st.other, st.reported = nil, false // not a conflict: a deliberate take
	}
	c.mu.Unlock()
	if first {
		c.log.Warn("this agent was taken over by another daemon (continuityd fleet take): this daemon stops writing it; its writes are refused with AGENT_HANDED_OVER, and what it holds that the fleet lacks stays here",
			"agent", agent, "taken_by", v.To, "at", v.At, "revision", v.Revision, "forced", v.Forced)
		if c.o.OnHandover != nil {
			c.o.OnHandover(*v)
		}
	}
}

// Take makes this daemon the agent's writer in the fleet: doc (the
// agent's resume document, as PutState takes it) is written over the
// agent's key at the revision just read, and the handover recorded. It is
// refused (*capsule.FleetTakeError) when the fleet holds no state of the
// agent or names no other writer of it, when the other writer was seen
// within the conflict window and force is not set (it may be running), and
// when the key changed between the read and the write (another taker, or
// the old writer, got there first). It returns the handover, and the
// key's new revision for the next PutState.
func (c *Client) Take(ctx context.Context, agent string, doc json.RawMessage, force bool) (*capsule.FleetHandover, error) {
	if !namePattern.MatchString(agent) {
		return nil, fmt.Errorf("nats: agent name %q cannot be a key", agent)
	}
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	env, err := c.envelope(agent, doc)
	if err != nil {
		return nil, fmt.Errorf("nats: agent %s: %w", agent, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	refuse := func(f string, a ...any) error {
		return &capsule.FleetTakeError{Agent: agent, Why: fmt.Sprintf("agent %s: ", agent) + fmt.Sprintf(f, a...)}
	}
	for range 3 {
		e, err := c.kv.Get(ctx, agent)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, refuse("the fleet (bucket %s) holds no state of it: there is nothing to take; this daemon writes it as it is", c.o.Bucket)
		}
		if err != nil {
			return nil, fmt.Errorf("nats: reading the state of agent %s from bucket %s: %w", agent, c.o.Bucket, err)
		}
		from, err := c.lastOther(ctx, agent, e)
		if err != nil {
			return nil, err
		}
		if from == nil {
			return nil, refuse("this daemon writes it already, and the fleet names no other writer of it: there is nothing to take")
		}
		ago := max(time.Since(from.At), 0)
		recent := ago < c.o.ConflictWindow
		if recent && !force {
			return nil, &capsule.FleetTakeError{Agent: agent, Recent: true, Writer: from.writer(), SeenAt: from.At, Window: c.o.ConflictWindow,
				Why: fmt.Sprintf("agent %s: machine %s wrote it %s ago (at %s), within the conflict window (%s): it may still be running. Stop it and take the agent when the window has passed, or, if that machine is known to be gone, take it now with --force",
					agent, from.writer(), ago.Round(time.Second), from.At.Format(time.RFC3339), c.o.ConflictWindow)}
		}
		rec := handoverRecord{V: 1, Agent: agent, FromMachine: from.Machine, FromInstance: from.Instance, FromAt: from.At,
			ToMachine: c.o.Machine, ToInstance: c.o.Instance, At: time.Now().UTC(), Seq: env.Seq, Forced: recent}
		env.Handover = &rec
		val, err := json.Marshal(env)
		if err != nil {
			return nil, fmt.Errorf("nats: agent %s: encoding the state: %w", agent, err)
		}
		if c.o.beforeTake != nil {
			c.o.beforeTake(agent, e.Revision())
		}
		c.track(agent, e.Revision(), val)
		n, err := c.kv.Update(ctx, agent, val, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			now, gerr := c.kv.Get(ctx, agent)
			if gerr == nil {
				if cur, derr := decodeEnvelope(now.Value()); derr == nil && cur.writer() == c.me() && cur.Handover == nil {
					continue // this daemon's own publisher wrote meanwhile: read again
				} else if derr == nil {
					return nil, &capsule.FleetTakeError{Agent: agent, Lost: true, Writer: cur.writer(), SeenAt: cur.At,
						Why: fmt.Sprintf("agent %s: %s wrote it while this take was under way (revision %d, now %d): another take won, or the old writer is alive; nothing was written (see continuityd fleet)",
							agent, cur.writer(), e.Revision(), now.Revision())}
				}
			}
			return nil, refuse("its fleet state changed while this take was under way (revision %d); nothing was written: look again (continuityd fleet)", e.Revision())
		}
		if err != nil {
			return nil, fmt.Errorf("nats: writing the state of agent %s to bucket %s: %w", agent, c.o.Bucket, c.classify(err, "", time.Now()))
		}
		rec.Revision = n
		c.took(agent, n, &rec)
		if b, merr := json.Marshal(rec); merr == nil {
			if _, perr := c.kv.Put(ctx, takenKey(agent), b); perr != nil {
				// The key is taken (the marker in its envelope says so to a
				// watcher); a daemon that looks later may not learn of it.
				c.log.Warn("the agent is taken but the handover record was not written; a daemon that comes back later sees a conflict instead",
					"agent", agent, "key", takenKey(agent), "err", perr)
			}
		}
		v := rec.view(c.o.Name, capsule.HandoverTaken)
		return &v, nil
	}
	return nil, refuse("its fleet state kept changing under this take; nothing was written: look again (continuityd fleet)")
}

// took records this daemon's successful take.
func (c *Client) took(agent string, rev uint64, rec *handoverRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.agents[agent]
	if st == nil {
		return
	}
	st.base = max(st.base, rev)
	st.holding = true
	st.handover, st.handoverLoaded = rec, true
	st.other, st.reported = nil, false
}

// lastOther is the latest other writer of the agent the fleet shows, at
// its latest sign of life: the key's holder when it is not this daemon,
// else the newest other writer in the key's history; a fresher state an
// other writer kept apart (a conflict key) counts as its sign of life.
// nil: none.
func (c *Client) lastOther(ctx context.Context, agent string, e jetstream.KeyValueEntry) (*envelope, error) {
	var from *envelope
	if cur, err := decodeEnvelope(e.Value()); err != nil || cur.writer() != c.me() {
		from = &cur // not decodable: an unknown writer, of unknown age
	} else {
		hist, err := c.kv.History(ctx, agent)
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("nats: reading the history of agent %s in bucket %s: %w", agent, c.o.Bucket, err)
		}
		for i := len(hist) - 1; i >= 0; i-- {
			if hist[i].Operation() != jetstream.KeyValuePut {
				continue
			}
			if env, err := decodeEnvelope(hist[i].Value()); err == nil && env.writer() != c.me() {
				from = &env
				break
			}
		}
	}
	lister, err := c.kv.ListKeysFiltered(ctx, agent+".conflict.*")
	if err != nil {
		return from, nil
	}
	defer func() { _ = lister.Stop() }()
	for k := range lister.Keys() {
		se, err := c.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		env, err := decodeEnvelope(se.Value())
		if err != nil || env.writer() == c.me() {
			continue
		}
		if from == nil || env.At.After(from.At) {
			if from != nil && from.writer() == env.writer() {
				from.At = env.At
			} else {
				from = &env
			}
		}
	}
	return from, nil
}
