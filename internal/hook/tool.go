package hook

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/toolpaths"
)

// Which files an agent's tool changed (whose work a change is). Only the
// paths are read from tool_input, never the content, the old and new
// strings or the command.
//
//   - Claude Code's PostToolUse for Edit, Write and MultiEdit carries
//     tool_input.file_path, NotebookEdit tool_input.notebook_path
//     (hooks docs, "PostToolUse input"). PostToolUse comes only when the
//     tool succeeded.
//   - Codex's PostToolUse for apply_patch carries the patch in
//     tool_input.command (codex-rs HookToolName::apply_patch; its paths are
//     relative to cwd).
//   - A shell tool's PreToolUse and PostToolUse bracket the command: what
//     changes between them is the agent's. Claude Code names it Bash; Codex
//     sends every shell-like tool as Bash too (HookToolName::bash), the other
//     names are taken in case a version sends its own.

// Tool kinds.
const (
	ToolEdit       = capsule.ToolEdit       // Paths are the files the call changed
	ToolShellStart = capsule.ToolShellStart // a shell tool call begins (PreToolUse)
	ToolShellEnd   = capsule.ToolShellEnd   // it ended (PostToolUse)
)

// Tool is what one tool call's hook says about the files the agent changes.
type Tool struct {
	Name string // tool_name, one of the known ones
	Kind string // ToolEdit, ToolShellStart or ToolShellEnd
	// ID is tool_use_id, which pairs a shell call's start with its end; ""
	// when absent or not shaped like an id.
	ID string
	// Paths are the files an edit changed, as the payload names them:
	// absolute, or relative to the event's Cwd (attribution.Resolver maps
	// them onto the workdir and refuses those outside it).
	Paths []string
	// Refused names the paths left out (a control character, too long, …)
	// with the reason, escaped for showing.
	Refused []string
}

// toolInput holds the tool_input fields read; everything else (content,
// old_string, new_string, …) is skipped by the decoder.
type toolInput struct {
	FilePath     json.RawMessage `json:"file_path"`
	NotebookPath json.RawMessage `json:"notebook_path"`
	Command      json.RawMessage `json:"command"`
}

// maxToolID bounds a tool_use_id; real ones are ~30 characters.
const maxToolID = 256

// toolFor reads the tool call of a Pre/PostToolUse payload; nil when the
// event or the tool says nothing about changed files.
func toolFor(p *payload) *Tool {
	pre := p.HookEventName == "PreToolUse"
	if !pre && p.HookEventName != "PostToolUse" {
		return nil
	}
	t := &Tool{Name: p.ToolName, ID: toolID(p.ToolUseID)}
	if toolpaths.IsShellTool(p.ToolName) {
		t.Kind = ToolShellEnd
		if pre {
			t.Kind = ToolShellStart
		}
		return t
	}
	if pre {
		return nil // an edit counts once it happened
	}
	var in toolInput
	if len(p.ToolInput) == 0 || p.ToolInput[0] != '{' || json.Unmarshal(p.ToolInput, &in) != nil {
		in = toolInput{}
	}
	t.Kind = ToolEdit
	switch {
	case toolpaths.EditPathField(p.ToolName) == "file_path":
		t.add(in.FilePath)
	case toolpaths.EditPathField(p.ToolName) == "notebook_path":
		t.add(in.NotebookPath)
	case p.ToolName == "apply_patch":
		var patch string
		if json.Unmarshal(in.Command, &patch) == nil {
			t.Paths, t.Refused = toolpaths.PatchPaths(patch)
		}
	default:
		return nil
	}
	if len(t.Paths) == 0 && len(t.Refused) == 0 {
		t.Refused = []string{fmt.Sprintf("%s named no file", p.ToolName)}
	}
	return t
}

// add keeps one path field if it is a string of an acceptable shape.
func (t *Tool) add(raw json.RawMessage) {
	var p string
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return
	}
	if err := toolpaths.CheckPath(p); err != nil {
		t.Refused = append(t.Refused, err.Error())
		return
	}
	t.Paths = append(t.Paths, p)
}

// toolID keeps a tool_use_id that looks like one: printable ASCII without
// spaces, bounded.
func toolID(s string) string {
	if s == "" || len(s) > maxToolID || strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
		return ""
	}
	return s
}

// maxSignalPathBytes bounds the paths one signal carries, well within the
// API's 64 KiB body: a patch naming more is cut there (the rest of its
// changes count as outside, never as another agent's).
const maxSignalPathBytes = 48 << 10

// signalTool is what the daemon is told of the call (capsule.SignalTool,
// checked again by its guard); nil when there is nothing to tell: no tool,
// or an edit whose every path was refused. cwd is the payload's, kept
// only when it is an absolute path of an acceptable shape. The time is the
// hook client's to set.
func (t *Tool) signalTool(cwd string) *capsule.SignalTool {
	if t == nil || t.Kind == ToolEdit && len(t.Paths) == 0 {
		return nil
	}
	st := &capsule.SignalTool{Name: t.Name, Kind: t.Kind, ID: t.ID}
	if filepath.IsAbs(cwd) && toolpaths.CheckPath(cwd) == nil {
		st.Cwd = cwd
	}
	n := 0
	for _, p := range t.Paths {
		if n += len(p) + 4; n > maxSignalPathBytes {
			break
		}
		st.Paths = append(st.Paths, p)
	}
	return st
}
