package mcpserver

// definition is one tool as MCP clients see it. The schemas are written
// out (not inferred from Go types) because they are documentation: the
// daemon enforces the rules they describe, strictly, with the API's codes.
type definition struct {
	Name, Title, Description, Schema string
}

const agentProp = `"agent": {"type": "string", "description": "The agent; may be left out when the daemon serves one."}`

var definitions = []definition{
	{
		Name:  "resume",
		Title: "Where was I?",
		Description: "Read the agent's continuity: goal (focus), next action, blockers, what not to do, refuted hypotheses, " +
			"open commitments, recent decisions, receipts, what changed since the last visit, context usage and upstream health. " +
			"Call it first after a restart or a context compaction, before any write. Returns markdown, and the full resume document as structured content.",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `,
  "peek": {"type": "boolean", "description": "Read without resetting since_last_visit (for tools, not the agent itself)."}}}`,
	},
	{
		Name:  "checkpoint",
		Title: "Save where I am",
		Description: "Save focus, private working state, one decision with its reason, the PUBLIC status, and commitment operations, durably. " +
			"Any subset is valid. Save as the work moves, not at the end: context runs out first, and a checkpoint written early survives. " +
			"Refusals carry the Q-Day codes (MOTIVE_REQUIRED, TOO_MANY_OPEN_LOOPS, EVIDENCE_REQUIRED, INVALID_PUBLIC_STATUS, SECRET_DETECTED, RESIDENCY_STOPPED, …).",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `,
  "sync": {"type": "boolean", "description": "Wait (bounded) for the upstreams and report their answers."},
  "focus": {"type": "string", "maxLength": 4000, "description": "What the agent is working on."},
  "working_state": {"type": "object", "additionalProperties": false, "description": "Private note; fields left out keep their value.",
    "properties": {"next_action": {"type": "string", "maxLength": 4000}, "last_result": {"type": "string", "maxLength": 4000},
      "result_ref": {"type": ["string", "null"], "maxLength": 500}, "waiting_for": {"type": ["string", "null"], "maxLength": 4000}}},
  "decide": {"type": "object", "additionalProperties": false, "required": ["chosen", "because"], "description": "One decision per call.",
    "properties": {"chosen": {"type": "string"}, "because": {"type": "string", "minLength": 24}, "passed_over": {"type": "string"}}},
  "public_status": {"type": "object", "additionalProperties": false, "required": ["phase", "next_action"],
    "description": "PUBLIC: shown in the Q-Day office. No secrets, no email addresses, links only to allowed domains.",
    "properties": {"phase": {"enum": ["acting", "waiting", "resting"]}, "next_action": {"type": "string", "maxLength": 280},
      "reason": {"type": "string", "maxLength": 140}, "until": {"type": ["string", "integer"], "description": "ISO time or epoch ms"},
      "tool": {"type": "string", "maxLength": 40}, "route": {"type": "string", "maxLength": 120, "description": "A path template, no query."},
      "experiment": {"type": "string", "format": "uuid"}}},
  "commitments": {"type": "object", "additionalProperties": false, "properties": {
      "open": {"type": "array", "items": {"type": "object", "required": ["title"], "properties": {"title": {"type": "string", "minLength": 3}}}},
      "close": {"type": "array", "items": {"type": "object", "required": ["id", "evidence"], "properties": {"id": {"type": "string"}, "evidence": {"type": "string", "description": "post:UUID of a message the agent wrote"}}}},
      "drop": {"type": "array", "items": {"type": "object", "required": ["id", "reason"], "properties": {"id": {"type": "string"}, "reason": {"type": "string", "minLength": 8}}}}}},
  "stop": {"type": "object", "required": ["reason"], "properties": {"reason": {"type": "string"}}, "description": "Records a stop of the residency; every other field is ignored."},
  "resume_residency": {"type": "boolean", "description": "Lifts a stop. Only on a new operator instruction."}}}`,
	},
	{
		Name:  "wait_for_event",
		Title: "Wait for something to happen",
		Description: "Long poll for the agent's events (upstream directions, signals, file activity, commits, delivery failures), " +
			"up to max_seconds (1..90, default 20). Pass the cursor of the previous answer as after to miss nothing. Use it instead of polling.",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `,
  "max_seconds": {"type": "integer", "minimum": 1, "maximum": 90},
  "after": {"type": "integer", "minimum": 0, "description": "The cursor of a previous answer."}}}`,
	},
	{
		Name:        "capsule_read",
		Title:       "Read the handoff capsule",
		Description: "Read the agent's latest Continuity Capsule v1 (the handoff one session seals for the next).",
		Schema:      `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `}}`,
	},
	{
		Name:  "capsule_write",
		Title: "Store a handoff capsule",
		Description: "Store a Continuity Capsule v1: version, goal, done, next, blockers, do_not, refuted (hypotheses ruled out, with why), receipts. " +
			"Checked against the published schema; a credential-shaped value anywhere is refused. Strings are never cut.",
		Schema: `{"type": "object", "additionalProperties": false, "required": ["capsule"], "properties": {` + agentProp + `,
  "capsule": {"type": "object", "required": ["version"], "properties": {"version": {"enum": ["1", "1.0", "v1"]},
    "goal": {"type": "string", "maxLength": 4000}, "done": {"type": "string", "maxLength": 4000}, "next": {"type": "string", "maxLength": 4000},
    "blockers": {"type": "string", "maxLength": 4000}, "do_not": {"type": "string", "maxLength": 4000}, "refuted": {"type": "string", "maxLength": 4000},
    "receipts": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 500}},
    "written_by": {"type": "string", "maxLength": 200}, "written_at": {"type": "string"}, "ttl_days": {"type": ["string", "integer"]},
    "handoff_to": {"type": "string", "maxLength": 200}}}}}`,
	},
	{
		Name:  "capsule_seal",
		Title: "Seal a handoff capsule from the current state",
		Description: "Build a capsule from the saved state (focus → goal, next action → next, last result → done, waiting for → blockers, " +
			"do_not and refuted from the latest capsule, the receipts) and store it sealed. Fields given here override.",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `,
  "goal": {"type": "string"}, "done": {"type": "string"}, "next": {"type": "string"}, "blockers": {"type": "string"},
  "do_not": {"type": "string"}, "refuted": {"type": "string"}, "receipts": {"type": "array", "items": {"type": "string"}},
  "handoff_to": {"type": "string"}, "ttl_days": {"type": ["string", "integer"]}}}`,
	},
	{
		Name:  "signal",
		Title: "Report a context signal",
		Description: "Tell the daemon about the agent's context: {kind: context, used_fraction: 0.83}, {kind: compaction, phase: pre|post, trigger: manual|auto}, " +
			"{kind: session, event: start|end|stop}, {kind: activity, event: prompt|tool}. The checkpoint policy acts on them.",
		Schema: `{"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {` + agentProp + `,
  "kind": {"enum": ["context", "compaction", "session", "activity"]},
  "used_fraction": {"type": "number", "minimum": 0, "maximum": 1}, "tokens": {"type": "integer", "minimum": 0}, "window": {"type": "integer", "minimum": 0},
  "phase": {"enum": ["pre", "post"]}, "trigger": {"enum": ["manual", "auto"]}, "event": {"type": "string"},
  "source": {"type": "string"}, "reason": {"type": "string"}, "session_id": {"type": "string"}, "transcript_path": {"type": "string"}}}`,
	},
	snapshotListDef,
	snapshotDiffDef,
}
