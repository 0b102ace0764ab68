package delxtest

import (
	"encoding/json"
	"time"
)

// Fleets, as the fake plays them (Delx publishes no more than that a fleet
// is the one exception to a capsule's privacy, for members who joined with
// an invite token; the rest is continuityd's assumption, docs/DELX.md):
//
//   - fleet_id and invite_token travel as arguments of leave_hive_note and
//     resume_session. A call that carries the fleet's invite token joins
//     the caller (its x-delx-agent-id) to the fleet; a wrong token is
//     INVALID_INVITE_TOKEN, an unknown fleet FLEET_NOT_FOUND.
//   - leave_hive_note with fleet_id stores the capsule for the fleet too;
//     the caller must be a member (NOT_FLEET_MEMBER otherwise).
//   - resume_session with fleet_id may name another agent_id: the caller
//     and that agent must both be members, and the answer is the capsule
//     that agent last wrote to the fleet. Without fleet_id, agent_id must
//     be the caller's own, as before.

// joinFleet checks fleet and, when invite is given, joins agent to it.
func (s *Server) joinFleet(fleet, agent, invite string) (code, text string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, known := s.opts.Fleets[fleet]
	switch {
	case !known:
		return "FLEET_NOT_FOUND", "fleet_id is not a fleet Delx knows", false
	case invite == "":
		return "", "", true
	case invite != want:
		// Never repeats the token, as every refusal of a credential.
		return "INVALID_INVITE_TOKEN", "invite_token is not this fleet's invite token; ask the fleet's owner for a new one", false
	}
	if s.members[fleet] == nil {
		s.members[fleet] = make(map[string]bool)
	}
	s.members[fleet][agent] = true
	return "", "", true
}

// checkMember requires agent to have joined fleet. who names the agent in
// the refusal: "the caller" or the agent_id asked for.
func (s *Server) checkMember(fleet, agent, who string) (code, text string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.members[fleet][agent] {
		return "NOT_FLEET_MEMBER", who + " is not a member of this fleet; members join with the fleet's invite token", false
	}
	return "", "", true
}

// storeInFleet keeps agent's capsule as its latest in fleet.
func (s *Server) storeInFleet(fleet, agent string, st stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFleet[fleet] == nil {
		s.inFleet[fleet] = make(map[string]stored)
	}
	s.inFleet[fleet][agent] = st
}

// fleetCapsule is agent's latest capsule in fleet.
func (s *Server) fleetCapsule(fleet, agent string) (stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.inFleet[fleet][agent]
	return st, ok
}

// Members returns the agent_ids that joined fleet.
func (s *Server) Members(fleet string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for a := range s.members[fleet] {
		out = append(out, a)
	}
	return out
}

// readMemberAllowed is resume_session's fleet check: the caller must be a
// member, and so must the agent it reads.
func (s *Server) readMemberAllowed(fleet, caller, target string) (code, text string, ok bool) {
	if !s.opts.SkipMembershipCheck {
		if code, text, ok := s.checkMember(fleet, caller, "the calling agent"); !ok {
			return code, text, false
		}
		if target != caller {
			if code, text, ok := s.checkMember(fleet, target, "agent_id"); !ok {
				return code, text, false
			}
		}
	}
	return "", "", true
}

// PlantFleetCapsule makes agent a member of fleet holding raw as its
// latest capsule there, unchecked: what a Delx that let something through,
// or one that is not what it seems, would serve. Tests use it to show that
// the reader guards what it is given.
func (s *Server) PlantFleetCapsule(fleet, agent string, raw json.RawMessage) {
	s.mu.Lock()
	if s.members[fleet] == nil {
		s.members[fleet] = make(map[string]bool)
	}
	s.members[fleet][agent] = true
	s.mu.Unlock()
	s.storeInFleet(fleet, agent, stored{capsule: append(json.RawMessage(nil), raw...), sessionID: "planted", at: time.Now()})
}
