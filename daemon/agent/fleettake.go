package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/events"
	"github.com/continuityd/continuityd/internal/ops"
)

// Handing an agent over between machines (`continuityd fleet take`): the
// daemon that takes it writes its state over the old writer's in the
// fleet; the old one, if it comes back, refuses the agent's writes
// (AGENT_HANDED_OVER), puts no state, ships nothing more to the fleet
// (what it held unshipped stays in its outbox) and still answers resume,
// degraded. Both say so in their logs, events, resume and status.

// FleetTake makes this daemon the agent's writer in its fleet upstream
// (upstreamName "" : its only one), when the daemon that wrote it is gone:
// seen last beyond the conflict window, or force.
func (a *Agent) FleetTake(ctx context.Context, upstreamName string, force bool) (*ops.FleetTakeAnswer, error) {
	fl, err := a.fleetNamed(upstreamName)
	if err != nil {
		return nil, err
	}
	if fl.isPending() {
		return nil, capsule.Refuse(capsule.CodeFleetUnavailable, "upstream",
			"agent %s has not been restored from the fleet (upstream %s) yet: it takes nothing before it holds what the fleet holds; retry when the fleet answers", a.name, fl.name)
	}
	if h := fl.c.Handover(a.name); h != nil && h.Here == capsule.HandoverGiven {
		return nil, capsule.Refuse(capsule.CodeAgentHandedOver, "",
			"agent %s was taken from this daemon by %s at %s: taking it back would write this daemon's older state over the one written there since. Stop this daemon, move its state directory aside and start it again: it resumes the agent from the fleet",
			a.name, h.To, h.At.Format(time.RFC3339))
	}
	r := a.LocalResume()
	r.RestoredFrom = fl.restoredFrom()
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, capsule.Refuse(capsule.CodeInternal, "", "the agent's state could not be encoded: %v", err)
	}
	h, err := fl.c.Take(ctx, a.name, doc, force)
	var te *capsule.FleetTakeError
	switch {
	case errors.As(err, &te):
		field := ""
		if te.Recent {
			field = "force"
		}
		return nil, capsule.Refuse(capsule.CodeFleetTakeRefused, field, "%s", te.Why)
	case err != nil:
		return nil, capsule.Refuse(capsule.CodeFleetUnavailable, "upstream",
			"the fleet (upstream %s) did not take agent %s over: %v; nothing changed there", fl.name, a.name, err)
	}
	fl.mu.Lock()
	fl.rev = max(fl.rev, h.Revision)
	fl.putSeq, fl.lastPutOK = r.Seq, true
	fl.mu.Unlock()
	a.log.Warn("this daemon took the agent over (continuityd fleet take): it writes it from now on, and the daemon it was taken from stops writing it if it comes back",
		"upstream", fl.name, "from", h.From, "from_last_seen", h.FromAt, "forced", h.Forced, "revision", h.Revision, "seq", h.Seq)
	a.feed.Publish(events.Event{Kind: "fleet_taken", Seq: r.Seq,
		Summary: "this daemon took the agent over from " + orUnknown(h.From) + " through upstream " + fl.name, Data: *h})
	return &ops.FleetTakeAnswer{Agent: a.name, Handover: *h}, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown writer"
	}
	return s
}

// fleetNamed is the agent's fleet upstream called name ("" : the only one).
func (a *Agent) fleetNamed(name string) (*fleetLink, error) {
	switch {
	case len(a.fleets) == 0:
		return nil, capsule.Refuse(capsule.CodeNotFound, "upstream",
			"agent %s ships to no nats upstream: there is no fleet to take it in", a.name)
	case name == "" && len(a.fleets) > 1:
		return nil, capsule.Refuse(capsule.CodeInvalidQuery, "upstream",
			"agent %s ships to several nats upstreams (%v); pick one with upstream=NAME (--upstream NAME)", a.name, a.FleetUpstreams())
	case name == "":
		return a.fleets[0], nil
	}
	for _, fl := range a.fleets {
		if fl.name == name {
			return fl, nil
		}
	}
	return nil, capsule.Refuse(capsule.CodeNotFound, "upstream",
		"agent %s ships to no nats upstream of that name; its nats upstreams are %v", a.name, a.FleetUpstreams())
}

// FleetHandover is the agent's handover between daemons as this daemon
// sees it (for resume and status), or nil.
func (a *Agent) FleetHandover() *capsule.FleetHandover {
	for _, fl := range a.fleets {
		if h := fl.c.Handover(a.name); h != nil {
			return h
		}
	}
	return nil
}

// handedOver is the refusal of a write of an agent taken from this
// daemon, or nil.
func (a *Agent) handedOver() error {
	h := a.FleetHandover()
	if h == nil || h.Here != capsule.HandoverGiven {
		return nil
	}
	return capsule.Refuse(capsule.CodeAgentHandedOver, "",
		"agent %s was taken over by %s at %s (continuityd fleet take, upstream %s): this daemon no longer writes it, and nothing was stored. Work on with the agent there; its resume here still answers",
		a.name, h.To, h.At.Format(time.RFC3339), h.Upstream)
}

// FleetHandedOver reports that another daemon took this agent from this
// one (the fleet client logs it once), as a fleet_handed_over event. It
// never blocks.
func (a *Agent) FleetHandedOver(h capsule.FleetHandover) {
	a.feed.Publish(events.Event{Kind: "fleet_handed_over", Seq: h.Seq,
		Summary: "the agent was taken over by " + h.To + " through upstream " + h.Upstream + ": this daemon no longer writes it",
		Data:    h})
}
