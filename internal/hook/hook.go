// Package hook reduces an agent's hook payload (Claude Code or Codex, on
// the hook command's stdin) to what continuityd may keep: which session,
// which transcript, which directory, and the context signal the event
// means, and which files a tool call changed (tool.go). Prompt text, tool
// input other than the changed files' paths, assistant messages and
// compact summaries are never kept: only markers travel on.
package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// MaxPayload bounds what is read from stdin: payloads carry tool output
// and summaries, so they can be large, but a hook must stay cheap.
const MaxPayload = 4 << 20

// Agent kinds a payload can come from.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
)

// Event is a hook payload reduced to markers.
type Event struct {
	// Name is the hook event (hook_event_name): SessionStart, PreCompact…
	Name           string
	From           string // ClaudeCode or Codex (best guess; "" when unknown)
	SessionID      string
	TranscriptPath string
	Cwd            string
	// Signal is what the event means for the daemon; nil for events that
	// mean nothing to it (PreToolUse, Notification, …).
	Signal *capsule.Signal
	// Tool is what a tool call's PreToolUse or PostToolUse says about the
	// files the agent changes (tool.go); nil for other events and tools.
	Tool *Tool
}

// IsSessionStart reports whether the hook must answer with the resume.
func (e *Event) IsSessionStart() bool { return e.Name == "SessionStart" }

// payload holds the fields continuityd reads; everything else is ignored on
// purpose (hook payloads grow fields with every release).
type payload struct {
	SessionID      string  `json:"session_id"`
	TranscriptPath *string `json:"transcript_path"` // null in some Codex events
	Cwd            string  `json:"cwd"`
	HookEventName  string  `json:"hook_event_name"`
	Source         string  `json:"source"`  // SessionStart
	Trigger        string  `json:"trigger"` // Pre/PostCompact
	Reason         string  `json:"reason"`  // SessionEnd
	TurnID         *string `json:"turn_id"` // Codex only
	Model          string  `json:"model"`
	// Pre/PostToolUse (tool.go)
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`
}

// envelope is a capture tool's wrapper around the raw payload (the
// Shepherd probe captures in testdata keep stdin under "payload").
type envelope struct {
	Payload json.RawMessage `json:"payload"`
	Event   string          `json:"_event"`
}

// Parse reads one hook payload, raw or inside a capture envelope.
func Parse(b []byte) (*Event, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, errors.New("empty hook payload")
	}
	if len(b) > MaxPayload {
		return nil, fmt.Errorf("hook payload is %d bytes; at most %d are read", len(b), MaxPayload)
	}
	if !utf8.Valid(b) {
		return nil, errors.New("hook payload is not valid UTF-8")
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("hook payload is not a JSON object: %w", err)
	}
	raw := b
	if len(env.Payload) > 0 && env.Payload[0] == '{' {
		raw = env.Payload
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("hook payload: %w", err)
	}
	if p.HookEventName == "" {
		return nil, errors.New("hook payload has no hook_event_name")
	}
	e := &Event{Name: p.HookEventName, SessionID: p.SessionID, Cwd: p.Cwd, From: from(&p)}
	if p.TranscriptPath != nil {
		e.TranscriptPath = *p.TranscriptPath
	}
	e.Signal = signalFor(&p)
	e.Tool = toolFor(&p)
	if st := e.Tool.signalTool(p.Cwd); st != nil {
		// The tool call travels on the activity signal (a shell's
		// PreToolUse has none of its own).
		e.Signal = &capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", Tool: st}
	}
	if e.Signal != nil {
		e.Signal.SessionID = clip(p.SessionID)
		e.Signal.TranscriptPath = clip(e.TranscriptPath)
		e.Signal.Via = "hook"
	}
	return e, nil
}

// signalFor maps an event to its signal. Enumerated values are passed only
// when they are among the documented ones, so that a payload cannot smuggle
// text into the state.
func signalFor(p *payload) *capsule.Signal {
	switch p.HookEventName {
	case "SessionStart":
		return &capsule.Signal{Kind: capsule.SignalSession, Event: "start",
			Source: oneOf(p.Source, "startup", "resume", "clear", "compact", "fork")}
	case "PreCompact", "PostCompact":
		phase := "pre"
		if p.HookEventName == "PostCompact" {
			phase = "post"
		}
		// The daemon knows only manual and auto; anything else is left out
		// rather than passed on (found by FuzzParse).
		trigger := oneOf(p.Trigger, "manual", "auto")
		if trigger == "other" {
			trigger = ""
		}
		return &capsule.Signal{Kind: capsule.SignalCompaction, Phase: phase, Trigger: trigger}
	case "Stop":
		return &capsule.Signal{Kind: capsule.SignalSession, Event: "stop"}
	case "SessionEnd":
		return &capsule.Signal{Kind: capsule.SignalSession, Event: "end",
			Reason: oneOf(p.Reason, "clear", "resume", "logout", "prompt_input_exit", "other", "bypass_permissions_disabled")}
	case "UserPromptSubmit":
		return &capsule.Signal{Kind: capsule.SignalActivity, Event: "prompt"}
	case "PostToolUse":
		return &capsule.Signal{Kind: capsule.SignalActivity, Event: "tool"}
	default:
		return nil
	}
}

func oneOf(v string, allowed ...string) string {
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	if v == "" {
		return ""
	}
	return "other"
}

// clip bounds identifiers; real ones are far shorter.
func clip(s string) string {
	if len(s) > 512 {
		return ""
	}
	return s
}

func from(p *payload) string {
	switch {
	case p.TurnID != nil, strings.Contains(derefOr(p.TranscriptPath), "/.codex/"), strings.HasPrefix(p.Model, "gpt"):
		return Codex
	case strings.Contains(derefOr(p.TranscriptPath), "/.claude/"), strings.Contains(derefOr(p.TranscriptPath), "/claude/projects/"):
		return ClaudeCode
	default:
		return ""
	}
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SessionStartOutput is the hook output both Claude Code and Codex read on
// SessionStart: additionalContext is added to the agent's context.
func SessionStartOutput(additionalContext string) []byte {
	out, _ := json.Marshal(map[string]any{
		"hookSpecificOutput": map[string]any{
			"hookEventName":     "SessionStart",
			"additionalContext": additionalContext,
		},
	})
	return append(out, '\n')
}
