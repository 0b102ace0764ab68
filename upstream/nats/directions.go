package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/upstream"
)

// Directions limits.
const (
	// MaxDirectionBytes bounds a direction relayed as is; a larger one is
	// relayed as a note saying so (an operator's message, not a payload).
	MaxDirectionBytes = 16 << 10
	// RecentDirections is how many relayed directions per agent Resume shows.
	RecentDirections = 20
	// seenIDs is how many direction ids per agent are remembered to drop a
	// redelivery (an acknowledgement that was lost).
	seenIDs = 4096
	// directionAckWait: a direction fetched but not acknowledged (the
	// daemon died in between) is redelivered after this.
	directionAckWait = 30 * time.Second
)

// direction is one event of a Wait answer.
type direction struct {
	Kind    string          `json:"kind"` // "direction"
	ID      string          `json:"id"`   // the message's Nats-Msg-Id, else "seq-N"
	Seq     uint64          `json:"seq"`  // its stream sequence
	At      time.Time       `json:"at"`
	Subject string          `json:"subject"`
	Body    json.RawMessage `json:"body,omitempty"` // a JSON message, as sent
	Text    string          `json:"text,omitempty"` // any other message
}

// seenSet is a bounded set of ids, forgetting the oldest.
type seenSet struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func (s *seenSet) add(id string) (fresh bool) {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.ring) < seenIDs {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % seenIDs
	}
	s.ids[id] = struct{}{}
	return true
}

// ConsumerName is the durable consumer relaying agent's directions.
func ConsumerName(agent string) string { return "continuityd-dir-" + agent }

// consumer finds or creates the agent's durable directions consumer. It
// is durable on the server, so a direction is relayed once even when the
// agent resumes on another machine.
func (c *Client) consumer(ctx context.Context, agent string) (jetstream.Consumer, error) {
	c.mu.Lock()
	cons := c.consumers[agent]
	c.mu.Unlock()
	if cons != nil {
		return cons, nil
	}
	name := ConsumerName(agent)
	cons, err := c.js.Consumer(ctx, c.o.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = c.js.CreateConsumer(ctx, c.o.Stream, jetstream.ConsumerConfig{
			Durable:       name,
			Description:   "continuityd: directions for agent " + agent,
			FilterSubject: c.subjects.direction(agent),
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       directionAckWait,
			MaxAckPending: 256,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = c.js.Consumer(ctx, c.o.Stream, name)
		}
	}
	if err != nil {
		return nil, c.setupError("directions consumer "+name+" on stream "+c.o.Stream, err)
	}
	c.mu.Lock()
	c.consumers[agent] = cons
	c.mu.Unlock()
	return cons, nil
}

// Wait implements upstream.Waiter: it waits up to maxSeconds (clamped to
// 1..90) for directions on DirectionSubject(agent) and answers like Q-Day's
// wait: {"woke":"event","events":[…]} or {"woke":"timeout","events":[]}.
// Each direction is acknowledged before it is returned and each message id
// is returned once (a redelivery of one already relayed is dropped).
func (c *Client) Wait(ctx context.Context, agent string, maxSeconds int) (json.RawMessage, error) {
	if !namePattern.MatchString(agent) {
		return nil, &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("agent name %q cannot be a subject token", agent)}
	}
	n := min(max(maxSeconds, MinWaitSeconds), MaxWaitSeconds)
	deadline := time.Now().Add(time.Duration(n) * time.Second)
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	cons, err := c.consumer(ctx, agent)
	if err != nil {
		return nil, err
	}
	for {
		if time.Until(deadline) < 50*time.Millisecond {
			return waitAnswer("timeout", nil)
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		m, err := cons.Next(jetstream.FetchContext(wctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, natsgo.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) {
				return waitAnswer("timeout", nil)
			}
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				c.mu.Lock()
				delete(c.consumers, agent)
				c.mu.Unlock()
			}
			return nil, c.classify(err, "", time.Now())
		}
		msgs := []jetstream.Msg{m}
		if b, err := cons.FetchNoWait(15); err == nil {
			for more := range b.Messages() {
				msgs = append(msgs, more)
			}
		}
		if evs := c.take(ctx, agent, msgs); len(evs) > 0 {
			return waitAnswer("event", evs)
		}
	}
}

// take acknowledges msgs and returns those not relayed before.
func (c *Client) take(ctx context.Context, agent string, msgs []jetstream.Msg) []direction {
	var out []direction
	for _, m := range msgs {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		// The ack is best effort: if it is lost the server redelivers
		// after directionAckWait and the seen set drops the copy.
		if err := m.DoubleAck(actx); err != nil {
			c.log.Warn("acknowledging a direction failed; a redelivery will be dropped", "agent", agent, "err", err)
		}
		cancel()
		d := toDirection(m)
		c.mu.Lock()
		s := c.seen[agent]
		if s == nil {
			s = &seenSet{ids: map[string]struct{}{}}
			c.seen[agent] = s
		}
		fresh := s.add(d.ID)
		if fresh {
			r := append(c.recent[agent], d)
			if len(r) > RecentDirections {
				r = r[len(r)-RecentDirections:]
			}
			c.recent[agent] = r
		}
		c.mu.Unlock()
		if fresh {
			out = append(out, d)
		}
	}
	return out
}

func toDirection(m jetstream.Msg) direction {
	d := direction{Kind: "direction", Subject: m.Subject()}
	if md, err := m.Metadata(); err == nil {
		d.Seq, d.At = md.Sequence.Stream, md.Timestamp.UTC()
	}
	d.ID = m.Headers().Get(natsgo.MsgIdHdr)
	if d.ID == "" {
		d.ID = fmt.Sprintf("seq-%d", d.Seq)
	}
	d.ID = guard.CleanRemoteName(d.ID)
	// A direction comes from another machine: its text reaches the agent
	// and the people reading its resume cleaned as automatic content is
	// (control characters visible, invisible formatting removed,
	// credentials redacted).
	data := bytes.TrimSpace(m.Data())
	switch {
	case len(data) > MaxDirectionBytes:
		d.Text = fmt.Sprintf("(a direction of %d bytes, over the %d relayed; read it from the stream at sequence %d)", len(data), MaxDirectionBytes, d.Seq)
	case len(data) > 0 && data[0] == '{' && json.Valid(data):
		d.Body = guard.CleanRemoteJSON(data)
	default:
		d.Text = guard.CleanRemoteText(string(data))
	}
	return d
}

func waitAnswer(woke string, evs []direction) (json.RawMessage, error) {
	if evs == nil {
		evs = []direction{}
	}
	return json.Marshal(map[string]any{"woke": woke, "events": evs})
}

// Resume implements upstream.Resumer: the fleet's view of the agent, for
// the resume document's "remote" part: where its fleet state came from and
// how old it is, where its writes end in the stream, the other writers
// seen, and the directions relayed lately (each id once).
func (c *Client) Resume(ctx context.Context, agent string) (json.RawMessage, error) {
	r, err := c.restore(ctx, agent, false)
	if err != nil {
		return nil, err
	}
	view := map[string]any{
		"kind":     Kind,
		"stream":   c.o.Stream,
		"bucket":   c.o.Bucket,
		"found":    r.Found,
		"last_seq": r.LastSeq,
	}
	if r.Found {
		view["state"] = map[string]any{"machine": r.Machine, "instance": r.Instance, "revision": r.Revision,
			"seq": r.Seq, "at": r.At, "age_seconds": int64(r.Age.Seconds())}
	}
	conflicts := []capsule.FleetConflictError{}
	for _, ce := range c.Conflicts() {
		if ce.Agent == agent {
			conflicts = append(conflicts, ce)
		}
	}
	view["conflicts"] = conflicts
	c.mu.Lock()
	dirs := append([]direction{}, c.recent[agent]...)
	c.mu.Unlock()
	view["directions"] = dirs
	return json.Marshal(view)
}
