package transcript

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/toolpaths"
)

// Which files the agent's tools changed, read from its transcript for when
// no hook runs (whose work a change is). Only paths and times are read:
// never a file's content, an edit's strings or a command.
//
//   - Claude Code: an assistant line's tool_use block of Edit, Write,
//     MultiEdit (input.file_path) or NotebookEdit (input.notebook_path)
//     counts once a later line's tool_result for its id says it did not
//     fail (is_error); its time is that result line's timestamp. A Bash
//     tool_use and its result bracket a shell run.
//   - Codex: a response_item custom_tool_call apply_patch (input: the
//     patch), the older function_call apply_patch ({"input": patch}) and
//     shell ({"command": ["apply_patch", patch]}), and the event_msg
//     patch_apply_end (changes: {path: {move_path}}) name the files of a
//     patch, at the line's timestamp; a function_call of a shell tool and
//     its function_call_output bracket a shell run.
//
// Paths are as written (absolute, or relative to the session's cwd);
// attribution.Resolver maps them onto the workdir.

// ToolCalls are the agent's tool calls one line completed.
type ToolCalls struct {
	Edits  []Edit
	Shells []ShellRun
}

// Edit is a tool call that changed files.
type Edit struct {
	Tool  string    // Edit, Write, MultiEdit, NotebookEdit, apply_patch, patch_apply_end
	Paths []string  // as written
	At    time.Time // zero when the line carries no usable timestamp
	// Refused names the paths left out (a control character, too long, …),
	// escaped for showing.
	Refused []string
}

// ShellRun is a shell tool call that ran from Start to End.
type ShellRun struct {
	Tool       string
	Start, End time.Time
}

// toolWords are the strings a line must contain to be worth decoding for
// tool calls; most lines contain none.
var (
	claudeToolWords = [][]byte{[]byte(`"Edit"`), []byte(`"Write"`), []byte(`"MultiEdit"`), []byte(`"NotebookEdit"`), []byte(`"Bash"`)}
	codexToolWords  = [][]byte{[]byte("apply_patch"), []byte("patch_apply_end"), []byte("function_call"), []byte("custom_tool_call")}
)

type toolEntry struct {
	Type      str                     `json:"type"`
	Timestamp str                     `json:"timestamp"`
	Message   obj[claudeToolsMessage] `json:"message"`
}

type claudeToolsMessage struct {
	Content arr[claudeToolBlock] `json:"content"`
}

type claudeToolBlock struct {
	Type      str                `json:"type"`
	ID        str                `json:"id"`
	Name      str                `json:"name"`
	Input     obj[editToolInput] `json:"input"`
	ToolUseID str                `json:"tool_use_id"`
	IsError   flag               `json:"is_error"`
}

type editToolInput struct {
	FilePath     str `json:"file_path"`
	NotebookPath str `json:"notebook_path"`
}

// lineTime reads a line's timestamp; zero when absent or odd.
func lineTime(s str) time.Time {
	if !s.ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s.v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// claudeTools reads the tool calls of one well-formed Claude Code line.
func (t *Tracker) claudeTools(u *Update, line []byte) {
	if !(!t.tools.empty() && bytes.Contains(line, []byte("tool_use_id"))) && !containsAny(line, claudeToolWords) {
		return
	}
	var e toolEntry
	if decodeLine(line, &e) != nil || !e.Message.ok || !e.Message.v.Content.ok {
		return
	}
	at := lineTime(e.Timestamp)
	for _, b := range e.Message.v.Content.v {
		if !b.ok {
			continue
		}
		blk := &b.v
		switch blk.Type.v {
		case "tool_use":
			if e.Type.v != "assistant" || !blk.ID.ok || !validSessionID(blk.ID.v) {
				continue
			}
			name := blk.Name.v
			c := pendingCall{name: name, at: at}
			switch toolpaths.EditPathField(name) {
			case "file_path":
				c.paths, c.refused = checkedPath(blk.Input.v.FilePath)
			case "notebook_path":
				c.paths, c.refused = checkedPath(blk.Input.v.NotebookPath)
			default:
				if !toolpaths.IsShellTool(name) {
					continue
				}
			}
			t.tools.add(blk.ID.v, c)
		case "tool_result":
			if !blk.ToolUseID.ok {
				continue
			}
			c, ok := t.tools.take(blk.ToolUseID.v)
			failed := blk.IsError.v || blk.IsError.bad
			if !ok || failed && !toolpaths.IsShellTool(c.name) {
				continue // a failed edit changed nothing; a failed command may have
			}
			t.completeCall(u, c, at)
		}
	}
}

// completeCall reports a call whose result came at at.
func (t *Tracker) completeCall(u *Update, c pendingCall, at time.Time) {
	if u.Tools == nil {
		u.Tools = &ToolCalls{}
	}
	if toolpaths.IsShellTool(c.name) {
		u.Tools.Shells = append(u.Tools.Shells, ShellRun{Tool: c.name, Start: c.at, End: at})
		return
	}
	if len(c.paths) > 0 || len(c.refused) > 0 {
		u.Tools.Edits = append(u.Tools.Edits, Edit{Tool: c.name, Paths: c.paths, At: at, Refused: c.refused})
	}
}

// checkedPath keeps a path field if it passes the shape check.
func checkedPath(s str) (paths, refused []string) {
	if !s.ok {
		return nil, []string{"no file named"}
	}
	if err := toolpaths.CheckPath(s.v); err != nil {
		return nil, []string{err.Error()}
	}
	return []string{s.v}, nil
}

type codexToolLine struct {
	Type      str                   `json:"type"`
	Timestamp str                   `json:"timestamp"`
	Payload   obj[codexToolPayload] `json:"payload"`
}

type codexToolPayload struct {
	Type      str                              `json:"type"`
	Name      str                              `json:"name"`
	CallID    str                              `json:"call_id"`
	Input     str                              `json:"input"`     // custom_tool_call
	Arguments json.RawMessage                  `json:"arguments"` // function_call: JSON in a string
	Success   flag                             `json:"success"`   // patch_apply_end
	Changes   map[string]obj[codexPatchChange] `json:"changes"`   // patch_apply_end
}

type codexPatchChange struct {
	MovePath str `json:"move_path"`
}

// codexArgs are the function_call arguments read: apply_patch's input, a
// shell call's command (a list, or a string in newer versions).
type codexArgs struct {
	Input   str             `json:"input"`
	Command json.RawMessage `json:"command"`
}

// codexTools reads the tool calls of one well-formed Codex line.
func (t *Tracker) codexTools(u *Update, line []byte) {
	if !containsAny(line, codexToolWords) {
		return
	}
	var l codexToolLine
	if decodeLine(line, &l) != nil || !l.Payload.ok {
		return
	}
	p := &l.Payload.v
	at := lineTime(l.Timestamp)
	switch {
	case l.Type.v == "response_item" && p.Type.v == "custom_tool_call" && p.Name.v == "apply_patch":
		t.codexPatch(u, p.Input.v, at)
	case l.Type.v == "response_item" && (p.Type.v == "function_call" || p.Type.v == "custom_tool_call"):
		args := functionArgs(p.Arguments)
		if p.Type.v == "custom_tool_call" {
			args = functionArgs(json.RawMessage(p.Input.v)) // the arguments, unquoted
		}
		switch {
		case p.Name.v == "apply_patch":
			t.codexPatch(u, args.Input.v, at)
		case toolpaths.IsShellTool(p.Name.v):
			if patch := shellPatch(args.Command); patch != "" {
				t.codexPatch(u, patch, at)
				return
			}
			if p.CallID.ok && validSessionID(p.CallID.v) {
				t.tools.add(p.CallID.v, pendingCall{name: p.Name.v, at: at})
			}
		}
	case l.Type.v == "response_item" && (p.Type.v == "function_call_output" || p.Type.v == "custom_tool_call_output"):
		if p.CallID.ok {
			if c, ok := t.tools.take(p.CallID.v); ok {
				t.completeCall(u, c, at)
			}
		}
	case l.Type.v == "event_msg" && p.Type.v == "patch_apply_end" && !p.Success.bad && (p.Success.v || !p.Success.set):
		e := Edit{Tool: "patch_apply_end", At: at}
		for path, ch := range p.Changes {
			e.add(path)
			if ch.ok && ch.v.MovePath.ok {
				e.add(ch.v.MovePath.v)
			}
		}
		slices.Sort(e.Paths)
		if len(e.Paths) > 0 || len(e.Refused) > 0 {
			if u.Tools == nil {
				u.Tools = &ToolCalls{}
			}
			u.Tools.Edits = append(u.Tools.Edits, e)
		}
	}
}

// add keeps a path of a patch if it passes the shape check and the bound.
func (e *Edit) add(p string) {
	if err := toolpaths.CheckPath(p); err != nil {
		e.Refused = append(e.Refused, err.Error())
		return
	}
	if len(e.Paths) < toolpaths.MaxPathsPerCall {
		e.Paths = append(e.Paths, p)
	}
}

// codexPatch reports the files an apply_patch input names.
func (t *Tracker) codexPatch(u *Update, patch string, at time.Time) {
	paths, refused := toolpaths.PatchPaths(patch)
	if len(paths) == 0 && len(refused) == 0 {
		return // not a patch (or one redacted away)
	}
	if u.Tools == nil {
		u.Tools = &ToolCalls{}
	}
	u.Tools.Edits = append(u.Tools.Edits, Edit{Tool: "apply_patch", Paths: paths, At: at, Refused: refused})
}

// functionArgs decodes a function_call's arguments, JSON in a string as the
// model wrote them (or, should a version write it so, an object).
func functionArgs(raw json.RawMessage) codexArgs {
	var a codexArgs
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return a
		}
		raw = []byte(s)
	}
	if decodeLine(bytes.TrimSpace(raw), &a) != nil {
		return codexArgs{}
	}
	return a
}

// shellPatch returns the patch a shell call applies, "" when it applies
// none: older Codex versions ran apply_patch through the shell tool, as
// ["apply_patch", patch] or a heredoc in ["bash", "-lc", "apply_patch <<'EOF'…"].
func shellPatch(command json.RawMessage) string {
	var argv []string
	if json.Unmarshal(command, &argv) != nil {
		var one string
		if json.Unmarshal(command, &one) != nil {
			return ""
		}
		argv = []string{one}
	}
	for i, a := range argv {
		if a == "apply_patch" && i+1 < len(argv) {
			return argv[i+1]
		}
		if strings.Contains(a, "apply_patch") && strings.Contains(a, "*** Begin Patch") {
			return a
		}
	}
	return ""
}
