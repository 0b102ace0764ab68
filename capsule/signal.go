package capsule

import "time"

// Signal kinds accepted by POST /v1/signals.
const (
	SignalContext    = "context"    // used_fraction of the context window
	SignalCompaction = "compaction" // phase pre|post, trigger manual|auto
	SignalSession    = "session"    // event start|end|stop, source, reason
	SignalActivity   = "activity"   // event prompt|tool: the agent is working
)

// Kinds of a SignalTool.
const (
	ToolEdit       = "edit"        // Paths are the files the call changed
	ToolShellStart = "shell_start" // a shell tool call begins (PreToolUse)
	ToolShellEnd   = "shell_end"   // it ended (PostToolUse)
)

// SignalTool is one tool call of an agent, as its hook saw it: an edit of
// Paths, or the start or end of a shell command (paired by ID). Only names,
// paths and times: never a file's content or a command.
type SignalTool struct {
	Name string `json:"name"`                                                       // tool_name: Edit, Write, MultiEdit, NotebookEdit, apply_patch, Bash…
	Kind string `json:"kind" jsonschema:"context, compaction, session or activity"` // ToolEdit, ToolShellStart or ToolShellEnd
	ID   string `json:"id,omitempty"`
	// Paths are as the payload names them: absolute, or relative to Cwd.
	Paths []string `json:"paths,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	// At is when the hook saw the call: a spooled event (the daemon was
	// down) keeps it; zero means when the daemon accepted it.
	At time.Time `json:"at,omitzero"`
}

// Signal is a context signal from an agent's hooks, statusline or
// transcript: context filling up, compaction, session start and end,
// activity. Signals are stored and shown in resume; the checkpoint policy
// acts on them.
type Signal struct {
	Kind string `json:"kind"`
	// UsedFraction is the share of the context window in use, 0..1 (context).
	UsedFraction *float64 `json:"used_fraction,omitempty"`
	// Tokens and Window are the raw numbers behind UsedFraction, when known.
	Tokens *int64 `json:"tokens,omitempty"`
	Window *int64 `json:"window,omitempty"`
	// Phase is pre or post (compaction).
	Phase string `json:"phase,omitempty"`
	// Trigger is manual or auto (compaction).
	Trigger string `json:"trigger,omitempty"`
	// Event is start, end or stop (session); prompt or tool (activity).
	Event string `json:"event,omitempty"`
	// Source is how a session started: startup, resume, clear, compact, fork.
	Source string `json:"source,omitempty"`
	// Reason is why a session ended (clear, logout, prompt_input_exit, other…).
	Reason string `json:"reason,omitempty"`
	// SessionID and TranscriptPath bind the signal to an agent session.
	SessionID      string `json:"session_id,omitempty"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	// Via names the channel that delivered it: hook, statusline, transcript,
	// cli, api, mcp. Informational.
	Via string `json:"via,omitempty"`
	// Tool is what an agent's tool call says about the files it changes
	// (activity signals of event tool, from a Pre/PostToolUse hook): whose
	// work each change in a shared workdir is.
	Tool *SignalTool `json:"tool,omitempty"`
	// At is when the daemon accepted it (set by the daemon; ignored on input).
	At time.Time `json:"at,omitzero"`
}
