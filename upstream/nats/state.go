package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// envelope is the value of an agent's key (and of a conflict key).
type envelope struct {
	V            int             `json:"v"`
	Agent        string          `json:"agent"`
	Machine      string          `json:"machine"`
	Instance     string          `json:"instance,omitempty"`
	Seq          uint64          `json:"seq"`
	At           time.Time       `json:"at"`
	LastWriteAt  *time.Time      `json:"last_write_at,omitempty"`
	UsedFraction *float64        `json:"used_fraction,omitempty"`
	Phase        string          `json:"phase,omitempty"`
	Upstreams    json.RawMessage `json:"upstreams,omitempty"`
	ConflictWith string          `json:"conflict_with,omitempty"` // on a conflict key: the writer holding the agent key
	Handover     *handoverRecord `json:"handover,omitempty"`      // on the write of a take (take.go)
	State        json.RawMessage `json:"state"`
}

func (e *envelope) writer() string { return writerID(e.Machine, e.Instance) }

// decodeEnvelope decodes a value read from the bucket. Another daemon (or
// anyone who may write the bucket) put it there, so the names, the phase
// and the upstreams' health it carries, shown in resume, status,
// `continuityd fleet` and the log, are cleaned as any text from another
// machine is (guard.CleanRemoteName, guard.CleanRemoteJSON). The state
// itself is checked part by part when an agent is restored from it
// (guard.CheckRemoteState).
func decodeEnvelope(b []byte) (envelope, error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return envelope{}, err
	}
	for _, s := range []*string{&env.Agent, &env.Machine, &env.Instance, &env.Phase, &env.ConflictWith} {
		*s = guard.CleanRemoteName(*s)
	}
	if len(env.Upstreams) > 0 {
		env.Upstreams = guard.CleanRemoteJSON(env.Upstreams)
	}
	if env.Handover != nil {
		env.Handover.clean()
	}
	return env, nil
}

func writerID(machine, instance string) string {
	if instance == "" {
		return machine
	}
	return machine + "/" + instance
}

// docFields are the resume document's fields the envelope repeats, so the
// fleet can be listed without reading whole documents.
type docFields struct {
	Seq         uint64     `json:"seq"`
	LastWriteAt *time.Time `json:"last_write_at"`
	Context     struct {
		UsedFraction *float64 `json:"used_fraction"`
	} `json:"context"`
	PublicStatus *struct {
		Phase string `json:"phase"`
	} `json:"public_status"`
	Upstreams json.RawMessage `json:"upstreams"`
}

// agentState is what the client knows of an agent's writers.
type agentState struct {
	base      uint64 // revisions up to base are history this daemon took on
	holding   bool   // the last PutState wrote the agent key
	lastVal   []byte // the last envelope this daemon tried to write
	other     *capsule.FleetConflictError
	otherSeen time.Time
	reported  bool
	cancel    func() // stops the watcher

	handover       *handoverRecord // the latest handover seen (take.go)
	handoverLoaded bool            // the fleet's record was read once
	warnedRev      uint64          // the handover said given, once
}

func (c *Client) me() string { return writerID(c.o.Machine, c.o.Instance) }

// isSelf reports whether machine and instance name this daemon (Options'
// Machine and Instance): a state it wrote itself is no other writer's.
func (c *Client) isSelf(machine, instance string) bool {
	return machine == c.o.Machine && instance == c.o.Instance
}

// Machine is this daemon's machine name, as it signs what it writes.
func (c *Client) Machine() string { return c.o.Machine }

// sideKeyToken makes a writer id one key token.
var sideKeyUnsafe = lazyregexp.New(`[^A-Za-z0-9_=-]`)

func (c *Client) sideKey(agent string) string {
	return agent + ".conflict." + sideKeyUnsafe.ReplaceAllString(c.me(), "_")
}

func (c *Client) envelope(agent string, doc json.RawMessage) (envelope, error) {
	var f docFields
	if err := json.Unmarshal(doc, &f); err != nil {
		return envelope{}, fmt.Errorf("the state document is not a JSON object: %w", err)
	}
	env := envelope{V: 1, Agent: agent, Machine: c.o.Machine, Instance: c.o.Instance, Seq: f.Seq,
		At: time.Now().UTC(), LastWriteAt: f.LastWriteAt, UsedFraction: f.Context.UsedFraction,
		Upstreams: f.Upstreams, State: doc}
	if f.PublicStatus != nil {
		env.Phase = f.PublicStatus.Phase
	}
	return env, nil
}

// PutState writes agent's latest state document (the daemon's resume
// document: its seq, last_write_at, context.used_fraction,
// public_status.phase and upstreams are repeated in the envelope for
// Fleet) to the bucket under the agent's name, if the key is still at
// lastRev (0: the key must not exist yet, or was last written by this same
// writer). It returns the key's new revision, to pass as lastRev next time.
//
// When another daemon wrote the key since, nothing is written over it:
// this daemon's state goes to its conflict key, and PutState returns 0 and
// a *capsule.FleetConflictError naming the other writer (Held false). When this daemon
// holds the key but another one is writing the same agent (its conflict
// key is fresh), the state is written and PutState returns the new
// revision and a *capsule.FleetConflictError with Held true. The first PutState of an
// agent starts a watcher that reports the other writer through
// Options.OnConflict within moments, whichever side writes next.
func (c *Client) PutState(ctx context.Context, agent string, doc json.RawMessage, lastRev uint64) (uint64, error) {
	if !namePattern.MatchString(agent) {
		return 0, fmt.Errorf("nats: agent name %q cannot be a key", agent)
	}
	if err := c.ensure(ctx); err != nil {
		return 0, err
	}
	env, err := c.envelope(agent, doc)
	if err != nil {
		return 0, fmt.Errorf("nats: agent %s: %w", agent, err)
	}
	val, err := json.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("nats: agent %s: encoding the state: %w", agent, err)
	}
	c.track(agent, lastRev, val)
	if h := c.givenAway(ctx, agent); h != nil {
		return 0, &capsule.FleetHandedOverError{Handover: *h}
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()

	rev := lastRev
	for range 3 {
		var n uint64
		if rev == 0 {
			n, err = c.kv.Create(ctx, agent, val)
		} else {
			n, err = c.kv.Update(ctx, agent, val, rev)
		}
		if err == nil {
			return n, c.held(agent, n)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("nats: writing the state of agent %s to bucket %s: %w", agent, c.o.Bucket, c.classify(err, "", time.Now()))
		}
		// Someone wrote the key since lastRev: who?
		e, gerr := c.kv.Get(ctx, agent)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			rev = 0 // deleted meanwhile (an operator): create it anew
			continue
		}
		if gerr != nil {
			return 0, fmt.Errorf("nats: reading the state of agent %s after a revision mismatch: %w", agent, gerr)
		}
		cur, derr := decodeEnvelope(e.Value())
		if derr == nil && cur.writer() == c.me() {
			// This writer's own earlier write (its acknowledgement was
			// lost, or the daemon restarted without the revision).
			rev = e.Revision()
			continue
		}
		if derr == nil && cur.Handover != nil {
			// Taken (the take's own write): not a conflict.
			h := *cur.Handover
			h.Revision = e.Revision()
			c.noteHandover(agent, &h)
		} else if rec, herr := c.readHandover(ctx, agent); herr == nil && rec != nil {
			c.noteHandover(agent, rec)
		}
		if h := c.Handover(agent); h != nil && h.Here == capsule.HandoverGiven {
			return 0, &capsule.FleetHandedOverError{Handover: *h}
		}
		ce := &capsule.FleetConflictError{Agent: agent, Machine: cur.Machine, Instance: cur.Instance,
			Revision: e.Revision(), Seq: cur.Seq, At: cur.At}
		c.noteConflict(agent, ce, false)
		c.putSide(ctx, agent, cur.writer())
		return 0, ce
	}
	return 0, fmt.Errorf("nats: agent %s: the state key kept changing under this writer", agent)
}

// track records the state this daemon is writing and starts the agent's
// conflict watcher on first use.
func (c *Client) track(agent string, lastRev uint64, val []byte) {
	st := c.state(agent, lastRev)
	c.mu.Lock()
	defer c.mu.Unlock()
	st.lastVal = val
}

// state is what the client knows of agent, made (and its watcher started)
// on first use, working from revision base at least: set before the
// watcher starts, so that it never takes the revisions this daemon took
// on for another writer's.
func (c *Client) state(agent string, base uint64) *agentState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.agents[agent]
	if st != nil {
		st.base = max(st.base, base)
	} else {
		st = &agentState{base: base}
		c.agents[agent] = st
		ctx, cancel := context.WithCancel(c.ctx)
		st.cancel = cancel
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.watch(ctx, agent)
		}()
	}
	return st
}

// held records a successful write and returns the conflict still seen, if any.
func (c *Client) held(agent string, rev uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.agents[agent]
	if st == nil { // released (a reload took the agent away) meanwhile
		return nil
	}
	st.base = max(st.base, rev)
	st.holding = true
	if o := c.freshConflict(st); o != nil {
		ce := *o
		ce.Held = true
		return &ce
	}
	return nil
}

// freshConflict returns the other writer seen within the conflict window.
// Called with c.mu held.
func (c *Client) freshConflict(st *agentState) *capsule.FleetConflictError {
	if st.other == nil {
		return nil
	}
	if h := st.handover; h != nil && c.isSelf(h.ToMachine, h.ToInstance) && !st.other.At.After(h.At) {
		st.other, st.reported = nil, false // a writer this daemon took the agent from
		return nil
	}
	if time.Since(st.otherSeen) > c.o.ConflictWindow && time.Since(st.other.At) > c.o.ConflictWindow {
		st.other, st.reported = nil, false
		return nil
	}
	return st.other
}

// noteConflict records another writer and reports it once per episode.
func (c *Client) noteConflict(agent string, ce *capsule.FleetConflictError, held bool) {
	c.mu.Lock()
	st := c.agents[agent]
	if st == nil {
		c.mu.Unlock()
		return
	}
	ce.Held = held
	if !held {
		st.holding = false
	}
	st.other, st.otherSeen = ce, time.Now()
	first := !st.reported
	st.reported = true
	c.mu.Unlock()
	if first {
		c.log.Warn("another daemon is writing this agent; neither state is written over the other",
			"agent", agent, "other_machine", ce.Machine, "other_instance", ce.Instance, "revision", ce.Revision, "held_here", ce.Held)
		if c.o.OnConflict != nil {
			c.o.OnConflict(*ce)
		}
	}
}

// putSide keeps this daemon's latest state under its conflict key, naming
// the writer that holds the agent key. Best effort: the conflict is
// reported whether or not it lands.
func (c *Client) putSide(ctx context.Context, agent, holder string) {
	c.mu.Lock()
	var val []byte
	if st := c.agents[agent]; st != nil { // nil: released meanwhile
		val = st.lastVal
	}
	c.mu.Unlock()
	var env envelope
	if val == nil || json.Unmarshal(val, &env) != nil {
		return
	}
	env.ConflictWith = holder
	env.At = time.Now().UTC()
	b, err := json.Marshal(env)
	if err == nil {
		_, err = c.kv.Put(ctx, c.sideKey(agent), b)
	}
	if err != nil {
		c.log.Warn("keeping this daemon's state apart failed", "agent", agent, "key", c.sideKey(agent), "err", err)
	}
}

// follow observes w's updates until they end or ctx does. It does not
// wait for the updates to close when ctx ends: the library closes them
// only when the subscription closes, and a cancel that lands while the
// watcher is being set up leaves it open (Close would wait forever).
func (c *Client) follow(ctx context.Context, agent string, w jetstream.KeyWatcher) {
	updates := w.Updates()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				return
			}
			if e != nil {
				c.observe(ctx, agent, e)
			}
		}
	}
}

// watch follows the agent's key and its conflict keys until ctx ends,
// re-subscribing after a failure.
func (c *Client) watch(ctx context.Context, agent string) {
	// A handover is known before the states kept apart before it are seen.
	c.mu.Lock()
	st := c.agents[agent]
	c.mu.Unlock()
	c.loadHandover(ctx, agent, st)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		w, err := c.kv.WatchFiltered(ctx, []string{agent, agent + ".conflict.*", takenKey(agent)}, jetstream.IgnoreDeletes())
		if err == nil {
			c.follow(ctx, agent, w)
			_ = w.Stop()
			attempt = 0
		}
		t := time.NewTimer(reconnectDelay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Client) observe(ctx context.Context, agent string, e jetstream.KeyValueEntry) {
	if c.o.observed != nil {
		defer c.o.observed(agent, e.Revision())
	}
	if e.Key() == takenKey(agent) {
		if h, err := decodeHandover(e.Value()); err == nil {
			c.noteHandover(agent, h)
		}
		return
	}
	env, err := decodeEnvelope(e.Value())
	if err != nil {
		return
	}
	if env.Handover != nil && e.Key() == agent {
		// The write of a take: the handover itself, whoever took it.
		h := *env.Handover
		h.Revision = e.Revision()
		c.noteHandover(agent, &h)
		if !c.isSelf(h.ToMachine, h.ToInstance) {
			return
		}
	}
	if env.writer() == c.me() {
		if e.Key() == agent {
			// The bucket says this daemon holds the key: known here in
			// the bucket's order, before any other writer's answer to it
			// (which PutState's return may not be).
			c.mu.Lock()
			if st := c.agents[agent]; st != nil && e.Revision() >= st.base {
				st.holding = true
			}
			c.mu.Unlock()
		}
		return
	}
	ce := &capsule.FleetConflictError{Agent: agent, Machine: env.Machine, Instance: env.Instance,
		Revision: e.Revision(), Seq: env.Seq, At: env.At}
	if e.Key() == agent {
		c.mu.Lock()
		st := c.agents[agent]
		newer := st != nil && e.Revision() > st.base
		c.mu.Unlock()
		if !newer {
			return // history this daemon took on (a resume from the fleet)
		}
		if h := c.Handover(agent); h != nil && h.Here == capsule.HandoverGiven {
			return // taken from this daemon, which writes it no more
		}
		// Another writer wrote over the revision this daemon works from: it
		// holds the key now. Say so where it will see it.
		c.noteConflict(agent, ce, false)
		pctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		c.putSide(pctx, agent, env.writer())
		cancel()
		return
	}
	if time.Since(env.At) > c.o.ConflictWindow {
		return // a conflict that ended long ago
	}
	if h := c.Handover(agent); h != nil && (h.Here == capsule.HandoverGiven || !env.At.After(h.At)) {
		return // taken from this daemon, or a state kept apart before the take
	}
	c.mu.Lock()
	holding := c.agents[agent] != nil && c.agents[agent].holding
	c.mu.Unlock()
	ce.Held = holding
	c.noteConflict(agent, ce, holding)
}

// Conflicts lists the agents with another writer seen within the conflict
// window (for status and a metric).
func (c *Client) Conflicts() []capsule.FleetConflictError {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capsule.FleetConflictError
	for _, st := range c.agents {
		if o := c.freshConflict(st); o != nil {
			out = append(out, *o)
		}
	}
	slices.SortFunc(out, func(a, b capsule.FleetConflictError) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}

// Release stops watching agent (it left this daemon's config): another
// daemon writing it afterwards is no conflict of this one's.
func (c *Client) Release(agent string) {
	c.mu.Lock()
	st := c.agents[agent]
	delete(c.agents, agent)
	c.mu.Unlock()
	if st != nil {
		st.cancel()
	}
}

// Restore reads the agent's latest state and where its writes end in the
// stream. Writes after Seq (up to LastSeq) are in the stream: Replay them
// from Seq+1 to catch the state up.
func (c *Client) Restore(ctx context.Context, agent string) (*capsule.FleetState, error) {
	return c.restore(ctx, agent, true)
}

// restore is Restore; sides says whether to read the conflict keys (a
// listing costs a consumer on the server, so Resume leaves them out and
// shows the conflicts the watcher saw).
func (c *Client) restore(ctx context.Context, agent string, sides bool) (*capsule.FleetState, error) {
	if !namePattern.MatchString(agent) {
		return nil, fmt.Errorf("nats: agent name %q cannot be a key", agent)
	}
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	r := &capsule.FleetState{Agent: agent}
	e, err := c.kv.Get(ctx, agent)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("nats: reading the state of agent %s from bucket %s: %w", agent, c.o.Bucket, err)
	default:
		env, err := decodeEnvelope(e.Value())
		if err != nil {
			return nil, fmt.Errorf("nats: the state of agent %s in bucket %s (revision %d) is not a continuityd state: %w", agent, c.o.Bucket, e.Revision(), err)
		}
		r.Found, r.State, r.Revision = true, env.State, e.Revision()
		r.Machine, r.Instance, r.Seq, r.At = env.Machine, env.Instance, env.Seq, env.At
		r.Self = c.isSelf(env.Machine, env.Instance)
		r.Age = max(time.Since(env.At), 0)
		if sides {
			// A restore takes on the fleet's history up to here: a
			// handover before it is no longer this daemon's concern.
			c.state(agent, e.Revision())
		}
	}
	seq, at, err := c.lastWrite(ctx, agent)
	if err != nil {
		return nil, err
	}
	r.LastSeq, r.LastAt = seq, at
	if !sides {
		return r, nil
	}
	if lister, err := c.kv.ListKeysFiltered(ctx, agent+".conflict.*"); err == nil {
		for k := range lister.Keys() {
			if se, err := c.kv.Get(ctx, k); err == nil {
				if env, err := decodeEnvelope(se.Value()); err == nil {
					r.Conflicts = append(r.Conflicts, capsule.FleetConflictError{Agent: agent, Machine: env.Machine,
						Instance: env.Instance, Revision: se.Revision(), Seq: env.Seq, At: env.At})
				}
			}
		}
		_ = lister.Stop()
	}
	return r, nil
}

// lastWrite is the log seq and time of the agent's latest write in the stream.
func (c *Client) lastWrite(ctx context.Context, agent string) (uint64, time.Time, error) {
	s, err := c.js.Stream(ctx, c.o.Stream)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("nats: stream %s: %w", c.o.Stream, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, c.subjects.writesOf(agent))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("nats: the last write of agent %s in stream %s: %w", agent, c.o.Stream, err)
	}
	seq, _ := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
	if seq == 0 {
		var w capsule.Write
		if json.Unmarshal(m.Data, &w) == nil {
			seq = w.Seq
		}
	}
	return seq, m.Time, nil
}

// Replay calls fn with each of agent's writes in the stream whose log seq
// is fromSeq or more, in the order the stream stored them, each
// Idempotency-Key once, up to the last write stored when Replay began. An
// error from fn stops it and is returned.
func (c *Client) Replay(ctx context.Context, agent string, fromSeq uint64, fn func(capsule.Write) error) error {
	if !namePattern.MatchString(agent) {
		return fmt.Errorf("nats: agent name %q cannot be a subject token", agent)
	}
	if err := c.ensure(ctx); err != nil {
		return err
	}
	s, err := c.js.Stream(ctx, c.o.Stream)
	if err != nil {
		return fmt.Errorf("nats: stream %s: %w", c.o.Stream, err)
	}
	subj := c.subjects.writesOf(agent)
	last, err := s.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("nats: the last write of agent %s in stream %s: %w", agent, c.o.Stream, err)
	}
	cons, err := c.js.OrderedConsumer(ctx, c.o.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverAllPolicy,
		// The server drops it soon after the replay, not 5 minutes later.
		InactiveThreshold: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("nats: reading the writes of agent %s from stream %s: %w", agent, c.o.Stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("nats: reading the writes of agent %s from stream %s: %w", agent, c.o.Stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	seen := map[string]struct{}{}
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("nats: reading the writes of agent %s from stream %s: %w", agent, c.o.Stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("nats: stream %s: a message without metadata: %w", c.o.Stream, err)
		}
		if err := c.replayOne(m, fromSeq, seen, fn); err != nil {
			return err
		}
		if md.Sequence.Stream >= last.Sequence {
			return nil
		}
	}
}

func (c *Client) replayOne(m jetstream.Msg, fromSeq uint64, seen map[string]struct{}, fn func(capsule.Write) error) error {
	h := m.Headers()
	if s, err := strconv.ParseUint(h.Get(HeaderSeq), 10, 64); err == nil && s < fromSeq {
		return nil
	}
	id := h.Get(natsgo.MsgIdHdr)
	if _, dup := seen[id]; dup && id != "" {
		return nil
	}
	var w capsule.Write
	if err := json.Unmarshal(m.Data(), &w); err != nil {
		return fmt.Errorf("nats: stream %s: message on %s is not a continuityd write: %w", c.o.Stream, m.Subject(), err)
	}
	if w.Seq < fromSeq {
		return nil
	}
	if id == "" {
		id = w.IdempotencyKey
		if _, dup := seen[id]; dup {
			return nil
		}
	}
	seen[id] = struct{}{}
	return fn(w)
}

// Agents lists every agent in the bucket, by name.
func (c *Client) Agents(ctx context.Context) ([]capsule.FleetEntry, error) {
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	w, err := c.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("nats: listing bucket %s: %w", c.o.Bucket, err)
	}
	defer w.Stop()
	byAgent := map[string]*capsule.FleetEntry{}
	sides := map[string][]envelope{}
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, fmt.Errorf("nats: listing bucket %s: %w", c.o.Bucket, ctx.Err())
		}
		if e == nil {
			break
		}
		env, err := decodeEnvelope(e.Value())
		if err != nil {
			continue // not ours
		}
		if agent, _, ok := strings.Cut(e.Key(), ".conflict."); ok {
			sides[agent] = append(sides[agent], env)
			continue
		}
		if strings.Contains(e.Key(), ".") {
			continue // AGENT.taken (take.go), or not ours: an agent's name has no dot
		}
		byAgent[e.Key()] = &capsule.FleetEntry{Agent: e.Key(), Machine: env.Machine, Instance: env.Instance,
			Revision: e.Revision(), Seq: env.Seq, UpdatedAt: env.At, LastWrite: env.LastWriteAt,
			ContextFraction: env.UsedFraction, PublicPhase: env.Phase, Upstreams: env.Upstreams}
	}
	out := make([]capsule.FleetEntry, 0, len(byAgent))
	for agent, fe := range byAgent {
		for _, s := range sides[agent] {
			if time.Since(s.At) <= c.o.ConflictWindow && s.writer() != writerID(fe.Machine, fe.Instance) {
				fe.ConflictWith = append(fe.ConflictWith, s.writer())
			}
		}
		out = append(out, *fe)
	}
	slices.SortFunc(out, func(a, b capsule.FleetEntry) int { return strings.Compare(a.Agent, b.Agent) })
	return out, nil
}
