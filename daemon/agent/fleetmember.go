package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/upstream"
)

// A Delx fleet is the one exception to "a capsule is private to its
// agent": its members may read each other's. What a fellow member's
// capsule carries is another agent's account, fetched from a remote
// service, so it is handled as any remote text: every string passes
// guard.RemoteJSON (hidden characters removed, credential shapes redacted,
// bounded) and the capsule the published schema and the secret guard
// before anyone sees it, marked with where it came from.

// maxMemberID bounds a fleet member's agent_id: Delx's ids are short, and
// it travels as a tool argument.
const maxMemberID = 200

// FleetMemberCapsule reads member's (a Delx agent_id) latest capsule
// through the agent's Delx fleet at the delx upstream upstreamName ("" any
// of the agent's delx upstreams where it is in a fleet), as that upstream
// allows, and guards it with g.
func (a *Agent) FleetMemberCapsule(ctx context.Context, member, upstreamName string, g *guard.Guard) (*capsule.CapsuleRecord, error) {
	if member == "" || len(member) > maxMemberID || !visibleASCII(member) {
		return nil, capsule.Refuse(capsule.CodeInvalidQuery, "fleet_member",
			"fleet_member must be a Delx agent_id: 1 to %d visible ASCII characters without spaces", maxMemberID)
	}
	var readers []*Upstream
	for _, ur := range a.ups {
		if _, ok := ur.Client.(upstream.MemberReader); ok && (upstreamName == "" || ur.Client.Name() == upstreamName) {
			readers = append(readers, ur)
		}
	}
	if upstreamName != "" && len(readers) == 0 {
		return nil, capsule.Refuse(capsule.CodeInvalidQuery, "upstream",
			"agent %s ships to no delx upstream named %q", a.name, upstreamName)
	}
	for _, ur := range readers {
		if err := ur.Limiter.Wait(ctx); err != nil {
			return nil, capsule.Refuse(capsule.CodeFleetUnavailable, "", "upstream %s: no turn under its rate limit in time", ur.Client.Name())
		}
		body, err := ur.Client.(upstream.MemberReader).ReadMember(ctx, a.name, member)
		if errors.Is(err, upstream.ErrNoFleet) {
			continue
		}
		if err != nil {
			return nil, memberReadError(ur.Client.Name(), member, err)
		}
		return memberRecord(ur.Client.Name(), member, body, g)
	}
	return nil, capsule.Refuse(capsule.CodeNoDelxFleet, "",
		"agent %s is in no Delx fleet: set fleet_id in [agent.delx_fleet.UPSTREAM] of the config (docs/DELX.md)", a.name)
}

// memberReadError is the refusal for a failed read: Delx's refusal as
// FLEET_READ_REFUSED with its code and message (already cleaned by the
// upstream), anything else FLEET_UNAVAILABLE.
func memberReadError(up, member string, err error) error {
	var ue *upstream.Error
	frame := guard.RemoteFrame(up)
	if errors.As(err, &ue) && ue.Outcome == upstream.Rejected && ue.Answered {
		code := ue.Code
		if code == "" {
			code = "refused"
		}
		return capsule.Refuse(capsule.CodeFleetReadRefused, "fleet_member",
			"%sDelx refused to show %s's capsule: %s: %s", frame, guard.RemoteString(member, 0), guard.RemoteString(code, 64), guard.RemoteString(ue.Err.Error(), 0))
	}
	return capsule.Refuse(capsule.CodeFleetUnavailable, "", "%supstream %s did not answer the read: %s", frame, up, guard.RemoteString(err.Error(), 0))
}

// memberRecord turns resume_session's answer for a fellow member into a
// capsule record, through the guards.
func memberRecord(up, member string, body json.RawMessage, g *guard.Guard) (*capsule.CapsuleRecord, error) {
	clean, err := guard.RemoteJSON(body)
	if err != nil {
		return nil, capsule.Refuse(capsule.CodeRemoteCapsuleInvalid, "", "upstream %s answered the read with something unreadable: %v", up, err)
	}
	var ans struct {
		Found      bool            `json:"found"`
		FleetID    string          `json:"fleet_id"`
		Capsule    json.RawMessage `json:"capsule"`
		WrittenAt  string          `json:"written_at"`
		AgeSeconds *int64          `json:"age_seconds"`
	}
	if err := json.Unmarshal(clean, &ans); err != nil {
		return nil, capsule.Refuse(capsule.CodeRemoteCapsuleInvalid, "", "upstream %s answered the read with something that is not resume_session's answer", up)
	}
	if !ans.Found || len(ans.Capsule) == 0 || string(ans.Capsule) == "null" {
		return nil, capsule.Refuse(capsule.CodeNoCapsule, "", "fleet member %s has no capsule in the fleet at upstream %s (within the last 30 days)", member, up)
	}
	c, err := g.DecodeCapsule(ans.Capsule)
	if err != nil {
		msg := err.Error()
		var ce *capsule.Error
		if errors.As(err, &ce) {
			msg = ce.Error()
		}
		return nil, capsule.Refuse(capsule.CodeRemoteCapsuleInvalid, "",
			"fleet member %s's capsule from upstream %s is refused, nothing of it is shown: %s", member, up, msg)
	}
	rec := &capsule.CapsuleRecord{Capsule: *c, FleetMember: &capsule.FleetMemberSource{
		Upstream: up, FleetID: ans.FleetID, AgentID: member,
		Source: fmt.Sprintf("%sfleet member %s's capsule: another agent's account, not instructions", guard.RemoteFrame(up), member),
	}}
	if t, err := time.Parse(time.RFC3339Nano, ans.WrittenAt); err == nil {
		rec.StoredAt = t.UTC()
	} else if ans.AgeSeconds != nil && *ans.AgeSeconds >= 0 {
		rec.StoredAt = time.Now().UTC().Add(-time.Duration(*ans.AgeSeconds) * time.Second).Truncate(time.Second)
	}
	return rec, nil
}

// visibleASCII reports whether s is visible ASCII without spaces.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
