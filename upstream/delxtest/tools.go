package delxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
)

// Input schemas of the three tools, as a client listing them sees them. The
// handlers check the arguments themselves (raw handlers get no validation),
// answering a bad one with a tool error, as Delx does.
const (
	leaveHiveNoteSchema = `{"type":"object","properties":{
		"session_id":{"type":"string"},
		"capsule":{"type":"object"},
		"agent_id":{"type":"string"},
		"fleet_id":{"type":"string"},
		"invite_token":{"type":"string"},
		"agent_token":{"type":"string"}},
		"required":["session_id","capsule"]}`
	closeSessionSchema = `{"type":"object","properties":{
		"session_id":{"type":"string"},
		"capsule":{"type":"object"},
		"reason":{"type":"string"},
		"include_summary":{"type":"boolean"}},
		"required":["session_id"]}`
	resumeSessionSchema = `{"type":"object","properties":{
		"agent_id":{"type":"string"},
		"lookback_days":{"type":"integer","minimum":1,"maximum":90,"default":30},
		"fleet_id":{"type":"string"},
		"invite_token":{"type":"string"}},
		"required":["agent_id"]}`
)

func (s *Server) addTools() {
	s.mcp.AddTool(&mcp.Tool{
		Name:        ToolLeaveHiveNote,
		Description: "Write a Continuity Capsule v1 for the next session (schema-validated, secret scan fail-closed).",
		InputSchema: json.RawMessage(leaveHiveNoteSchema),
	}, s.leaveHiveNote)
	s.mcp.AddTool(&mcp.Tool{
		Name:        ToolCloseSession,
		Description: "Seal a capsule and close the session.",
		InputSchema: json.RawMessage(closeSessionSchema),
	}, s.closeSession)
	s.mcp.AddTool(&mcp.Tool{
		Name:        ToolResumeSession,
		Description: "Read-only: the latest capsule for the agent, with its age.",
		InputSchema: json.RawMessage(resumeSessionSchema),
	}, s.resumeSession)
}

// newCall starts the record of a tools/call from the request.
func newCall(req *mcp.CallToolRequest, tool string) Call {
	c := Call{At: time.Now(), Tool: tool}
	if req.Extra != nil && req.Extra.Header != nil {
		c.Header = req.Extra.Header.Clone()
		c.AgentID = req.Extra.Header.Get(HeaderAgentID)
		c.IdempotencyKey = req.Extra.Header.Get(HeaderIdempotencyKey)
	}
	if req.Params != nil {
		c.MetaIdempotencyKey, _ = req.Params.Meta[MetaIdempotencyKey].(string)
	}
	if c.IdempotencyKey == "" {
		c.IdempotencyKey = c.MetaIdempotencyKey
	}
	return c
}

// toolError records c as a tool error and answers with text.
func (s *Server) toolError(c Call, code, text string) (*mcp.CallToolResult, error) {
	c.Result, c.Message, c.Capsule = "tool_error", text, nil
	s.record(c)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"error": map[string]string{"code": code, "message": text}},
	}, nil
}

// ok records c as accepted and answers with v as structured content and as
// JSON text.
func (s *Server) ok(c Call, v any) (*mcp.CallToolResult, error) {
	c.Result = "ok"
	s.record(c)
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(raw)}},
		StructuredContent: json.RawMessage(raw),
	}, nil
}

// decodeArgs decodes a tool's arguments into dst, refusing what is not one
// JSON object.
func decodeArgs(req *mcp.CallToolRequest, dst any) error {
	raw := req.Params.Arguments
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return errors.New("arguments must be one JSON object of the documented fields")
	}
	return nil
}

// checkCapsule runs the shared guard over a capsule argument. The refusal
// text is the guard's, which names the field and rule, never the value.
func (s *Server) checkCapsule(raw json.RawMessage) (code, text string, ok bool) {
	if _, err := s.guard.DecodeCapsule(raw); err != nil {
		var ce *capsule.Error
		if errors.As(err, &ce) {
			return ce.Code, "capsule refused before storage: " + ce.Error(), false
		}
		return capsule.CodeInvalidCapsule, "capsule refused before storage: it is not a valid Continuity Capsule v1", false
	}
	return "", "", true
}

// checkSession requires a session the calling agent owns: one its
// registration issued (or Options.Sessions gave it).
func (s *Server) checkSession(session, agent string) (code, text string, ok bool) {
	owner, known := s.sessionOwner(session)
	switch {
	case !known:
		return "SESSION_NOT_FOUND", "session_id is not a session Delx issued; use the session_id your registration returned", false
	case owner != agent:
		return "SESSION_NOT_OWNED", "session_id belongs to another agent", false
	}
	return "", "", true
}

func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

func (s *Server) leaveHiveNote(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c := newCall(req, ToolLeaveHiveNote)
	var args struct {
		SessionID   string          `json:"session_id"`
		Capsule     json.RawMessage `json:"capsule"`
		AgentID     string          `json:"agent_id"`
		FleetID     string          `json:"fleet_id"`
		InviteToken string          `json:"invite_token"`
		AgentToken  string          `json:"agent_token"`
	}
	if err := decodeArgs(req, &args); err != nil {
		return s.toolError(c, "INVALID_ARGUMENTS", err.Error())
	}
	c.SessionID, c.FleetID, c.InviteToken = args.SessionID, args.FleetID, args.InviteToken
	if args.SessionID == "" {
		return s.toolError(c, "INVALID_ARGUMENTS", "session_id is required")
	}
	if !present(args.Capsule) {
		return s.toolError(c, "INVALID_ARGUMENTS", "capsule is required")
	}
	if args.AgentID != "" && args.AgentID != c.AgentID {
		return s.toolError(c, "AGENT_MISMATCH", "agent_id does not match the agent of the request")
	}
	if code, text, ok := s.checkSession(args.SessionID, c.AgentID); !ok {
		return s.toolError(c, code, text)
	}
	if code, text, ok := s.checkCapsule(args.Capsule); !ok {
		return s.toolError(c, code, text)
	}
	if args.InviteToken != "" && args.FleetID == "" {
		return s.toolError(c, "INVALID_ARGUMENTS", "invite_token needs the fleet_id it is the invite token of")
	}
	if args.FleetID != "" {
		if code, text, ok := s.joinFleet(args.FleetID, c.AgentID, args.InviteToken); !ok {
			return s.toolError(c, code, text)
		}
		if code, text, ok := s.checkMember(args.FleetID, c.AgentID, "the calling agent"); !ok {
			return s.toolError(c, code, text)
		}
	}
	now := time.Now()
	c.Capsule = compact(args.Capsule)
	st := stored{capsule: c.Capsule, sessionID: args.SessionID, at: now}
	s.mu.Lock()
	s.notes = append(s.notes, c.Capsule)
	s.latest[c.AgentID] = st
	s.mu.Unlock()
	if args.FleetID != "" {
		s.storeInFleet(args.FleetID, c.AgentID, st)
	}
	return s.ok(c, map[string]any{
		"stored":     true,
		"agent_id":   c.AgentID,
		"session_id": args.SessionID,
		"stored_at":  now.UTC().Format(time.RFC3339Nano),
	})
}

func (s *Server) closeSession(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c := newCall(req, ToolCloseSession)
	var args struct {
		SessionID      string          `json:"session_id"`
		Capsule        json.RawMessage `json:"capsule"`
		Reason         string          `json:"reason"`
		IncludeSummary bool            `json:"include_summary"`
	}
	if err := decodeArgs(req, &args); err != nil {
		return s.toolError(c, "INVALID_ARGUMENTS", err.Error())
	}
	c.SessionID = args.SessionID
	if args.SessionID == "" {
		return s.toolError(c, "INVALID_ARGUMENTS", "session_id is required")
	}
	if code, text, ok := s.checkSession(args.SessionID, c.AgentID); !ok {
		return s.toolError(c, code, text)
	}
	sealed := present(args.Capsule)
	now := time.Now()
	if sealed {
		if code, text, ok := s.checkCapsule(args.Capsule); !ok {
			return s.toolError(c, code, text)
		}
		c.Capsule = compact(args.Capsule)
		s.mu.Lock()
		s.latest[c.AgentID] = stored{capsule: c.Capsule, sessionID: args.SessionID, at: now}
		s.mu.Unlock()
	}
	return s.ok(c, map[string]any{
		"closed":     true,
		"session_id": args.SessionID,
		"sealed":     sealed,
		"reason":     args.Reason,
		"closed_at":  now.UTC().Format(time.RFC3339Nano),
	})
}

func (s *Server) resumeSession(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c := newCall(req, ToolResumeSession)
	var args struct {
		AgentID      string          `json:"agent_id"`
		LookbackDays json.RawMessage `json:"lookback_days"`
		FleetID      string          `json:"fleet_id"`
		InviteToken  string          `json:"invite_token"`
	}
	if err := decodeArgs(req, &args); err != nil {
		return s.toolError(c, "INVALID_ARGUMENTS", err.Error())
	}
	c.FleetID, c.InviteToken = args.FleetID, args.InviteToken
	if args.AgentID == "" {
		return s.toolError(c, "INVALID_ARGUMENTS", "agent_id is required")
	}
	if args.InviteToken != "" && args.FleetID == "" {
		return s.toolError(c, "INVALID_ARGUMENTS", "invite_token needs the fleet_id it is the invite token of")
	}
	if args.FleetID == "" && args.AgentID != c.AgentID {
		return s.toolError(c, "AGENT_MISMATCH", "agent_id does not match the agent of the request; another agent's capsule is read only through a fleet both are members of (fleet_id)")
	}
	if args.FleetID != "" {
		if code, text, ok := s.joinFleet(args.FleetID, c.AgentID, args.InviteToken); !ok {
			return s.toolError(c, code, text)
		}
		if code, text, ok := s.readMemberAllowed(args.FleetID, c.AgentID, args.AgentID); !ok {
			return s.toolError(c, code, text)
		}
	}
	days := 30
	if present(args.LookbackDays) {
		var n float64
		if json.Unmarshal(args.LookbackDays, &n) != nil || n != float64(int(n)) || n < 1 || n > 90 {
			return s.toolError(c, "INVALID_ARGUMENTS", "lookback_days must be an integer from 1 to 90")
		}
		days = int(n)
	}
	now := time.Now()
	var (
		st    stored
		found bool
	)
	if args.FleetID != "" {
		st, found = s.fleetCapsule(args.FleetID, args.AgentID)
	} else {
		s.mu.Lock()
		st, found = s.latest[args.AgentID]
		s.mu.Unlock()
	}
	if found && now.Sub(st.at) > time.Duration(days)*24*time.Hour {
		found = false
	}
	out := map[string]any{"agent_id": args.AgentID, "found": found, "lookback_days": days}
	if args.FleetID != "" {
		out["fleet_id"] = args.FleetID
	}
	if found {
		age := now.Sub(st.at)
		out["capsule"] = st.capsule
		if args.AgentID == c.AgentID { // another member's session is its own
			out["session_id"] = st.sessionID
		}
		out["written_at"] = st.at.UTC().Format(time.RFC3339Nano)
		out["age_seconds"] = int64(age.Seconds())
		out["age"] = fmt.Sprint(age.Round(time.Second))
	}
	return s.ok(c, out)
}

// compact returns raw without insignificant whitespace (raw is valid JSON).
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}
