package transcript

import (
	"bytes"
	"encoding/json"
)

// Format is the transcript dialect a Tracker parses.
type Format int

// The known formats. The zero Format is deliberately none of them, so a
// forgotten format is an error rather than a silent Claude Code parse.
const (
	// ClaudeCode is a Claude Code session transcript: one entry per line,
	// each with a top-level "type" (user, assistant, system, summary, …).
	ClaudeCode Format = iota + 1
	// Codex is a Codex CLI rollout: one {timestamp,type,payload} per line.
	Codex
)

// String names the format for logs.
func (f Format) String() string {
	switch f {
	case ClaudeCode:
		return "claude-code"
	case Codex:
		return "codex"
	}
	return "unknown"
}

// codexLineTypes are the top-level types a Codex rollout line carries
// (SOURCES.md §5.4; world_state and inter_agent_communication_metadata
// since 0.146).
var codexLineTypes = map[string]bool{
	"session_meta":                       true,
	"turn_context":                       true,
	"response_item":                      true,
	"event_msg":                          true,
	"compacted":                          true,
	"world_state":                        true,
	"inter_agent_communication_metadata": true,
}

// DetectFormat guesses the format from a transcript's first line. A Codex
// line is recognised by its {type, payload} envelope; a Claude Code entry
// by its sessionId or, lacking one (file-history-snapshot and summary lines
// come first in many files), by a type with no payload beside it. It
// returns false for anything else, including malformed JSON.
func DetectFormat(firstLine []byte) (Format, bool) {
	firstLine = bytes.TrimSpace(firstLine)
	if len(firstLine) == 0 || firstLine[0] != '{' {
		return 0, false
	}
	var probe struct {
		Type      any             `json:"type"`
		Payload   json.RawMessage `json:"payload"`
		SessionID any             `json:"sessionId"`
	}
	if err := json.Unmarshal(firstLine, &probe); err != nil {
		return 0, false
	}
	typ, _ := probe.Type.(string)
	hasPayload := len(probe.Payload) > 0 && probe.Payload[0] == '{'
	switch {
	case codexLineTypes[typ]:
		return Codex, hasPayload
	case probe.SessionID != nil:
		return ClaudeCode, true
	case typ != "" && !hasPayload:
		return ClaudeCode, true
	}
	return 0, false
}
