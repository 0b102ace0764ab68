package hook

import (
	"encoding/json"
	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// docPayload reads one of the hooks reference's examples as a map, so a
// test can vary the tool while keeping every other field as documented.
func docPayload(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "claude-code", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parseMap(t *testing.T, m map[string]any) *Event {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The documented PostToolUse (Write) and PreToolUse (Bash) examples, as
// they are: the file Write changed, and the start of a shell window.
func TestToolFromDocExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "claude-code", "input-posttooluse-write.json"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Tool{Name: "Write", Kind: ToolEdit, ID: "toolu_01ABC123...", Paths: []string{"/path/to/file.txt"}}
	if !reflect.DeepEqual(e.Tool, want) {
		t.Errorf("PostToolUse Write: Tool = %+v, want %+v", e.Tool, want)
	}
	if e.Signal == nil || e.Signal.Event != "tool" {
		t.Errorf("the activity signal is kept beside the tool: %+v", e.Signal)
	}
	b, err = os.ReadFile(filepath.Join("testdata", "claude-code", "input-pretooluse-common-fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	if e, err = Parse(b); err != nil {
		t.Fatal(err)
	}
	want = &Tool{Name: "Bash", Kind: ToolShellStart, ID: "toolu_01ABC123..."}
	if !reflect.DeepEqual(e.Tool, want) {
		t.Errorf("PreToolUse Bash: Tool = %+v, want %+v", e.Tool, want)
	}
}

// Every edit tool, from the documented payload with the tool's own input
// (Claude Code's tool schemas: file_path, notebook_path), and Codex's
// apply_patch with a patch from Codex's own test scenarios.
func TestToolEachEditTool(t *testing.T) {
	for _, c := range []struct {
		name  string
		input map[string]any
		want  []string
	}{
		{"Edit", map[string]any{"file_path": "/w/src/a.go", "old_string": "x", "new_string": "y", "replace_all": false}, []string{"/w/src/a.go"}},
		{"MultiEdit", map[string]any{"file_path": "/w/src/b.go", "edits": []any{map[string]any{"old_string": "a", "new_string": "b"}}}, []string{"/w/src/b.go"}},
		{"NotebookEdit", map[string]any{"notebook_path": "/w/nb.ipynb", "new_source": "print(1)", "cell_id": "c1"}, []string{"/w/nb.ipynb"}},
		{"apply_patch", map[string]any{"command": "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-old content\n+new content\n*** End Patch\n"},
			[]string{"old/name.txt", "renamed/dir/name.txt"}},
	} {
		m := docPayload(t, "input-posttooluse-write.json")
		m["tool_name"], m["tool_input"] = c.name, c.input
		e := parseMap(t, m)
		if e.Tool == nil || e.Tool.Kind != ToolEdit || !reflect.DeepEqual(e.Tool.Paths, c.want) || len(e.Tool.Refused) != 0 {
			t.Errorf("%s: Tool = %+v, want paths %q", c.name, e.Tool, c.want)
		}
		// The same tool before it ran claims nothing.
		m["hook_event_name"] = "PreToolUse"
		if e := parseMap(t, m); e.Tool != nil {
			t.Errorf("%s PreToolUse: Tool = %+v, want none", c.name, e.Tool)
		}
	}
}

// A shell call's end pairs with its start by tool_use_id; Codex's shell
// comes as Bash with a Codex payload's fields (its post-tool-use schema).
func TestToolShellWindow(t *testing.T) {
	m := docPayload(t, "input-pretooluse-common-fields.json")
	m["hook_event_name"] = "PostToolUse"
	m["tool_response"] = map[string]any{"stdout": "", "exit_code": 0}
	if e := parseMap(t, m); e.Tool == nil || e.Tool.Kind != ToolShellEnd || e.Tool.ID != "toolu_01ABC123..." {
		t.Errorf("PostToolUse Bash: %+v", e.Tool)
	}
	codex := map[string]any{
		"session_id": "019e1625-789d-76c0-80ab-3724b5ddb799", "turn_id": "019e1625-0000-7000-8000-000000000001",
		"transcript_path": nil, "cwd": "/w", "hook_event_name": "PreToolUse", "model": "gpt-5.5",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "git checkout -- ."},
		"tool_use_id": "call_0k5UNli2G7c61FbHXgj9GuX0",
	}
	e := parseMap(t, codex)
	if e.From != Codex || e.Tool == nil || e.Tool.Kind != ToolShellStart || e.Tool.ID != "call_0k5UNli2G7c61FbHXgj9GuX0" {
		t.Errorf("Codex PreToolUse Bash: from %q, %+v", e.From, e.Tool)
	}
}

// What a tool names is checked, never trusted: control characters and
// odd shapes are refused and named escaped, the rest of the event stands.
func TestToolRefusesBadPaths(t *testing.T) {
	for name, c := range map[string]struct {
		tool  string
		input any
		why   string
	}{
		"escape sequence":  {"Write", map[string]any{"file_path": "/w/a\x1b]0;pwned\x07.txt"}, "control character"},
		"newline":          {"Edit", map[string]any{"file_path": "/w/a\nb"}, "control character"},
		"too long":         {"Write", map[string]any{"file_path": "/" + strings.Repeat("a", 5000)}, "bytes"},
		"not a string":     {"Write", map[string]any{"file_path": 42}, "named no file"},
		"input not object": {"Edit", "file_path=/etc/passwd", "named no file"},
		"patch bad name":   {"apply_patch", map[string]any{"command": "*** Add File: x\x00y\n"}, "control character"},
	} {
		m := docPayload(t, "input-posttooluse-write.json")
		m["tool_name"], m["tool_input"] = c.tool, c.input
		e := parseMap(t, m)
		if e.Tool == nil || len(e.Tool.Paths) != 0 || len(e.Tool.Refused) != 1 || !strings.Contains(e.Tool.Refused[0], c.why) {
			t.Errorf("%s: Tool = %+v, want one refusal saying %q", name, e.Tool, c.why)
			continue
		}
		if strings.ContainsAny(e.Tool.Refused[0], "\x1b\x07\n\x00") {
			t.Errorf("%s: the refusal carries a raw control character: %q", name, e.Tool.Refused[0])
		}
		if e.Signal == nil {
			t.Errorf("%s: the event's signal was lost", name)
		}
	}
	// Tools that change nothing (Read, Glob) say nothing; an odd id is dropped.
	m := docPayload(t, "input-posttooluse-write.json")
	m["tool_name"] = "Read"
	if e := parseMap(t, m); e.Tool != nil {
		t.Errorf("Read: %+v", e.Tool)
	}
	m = docPayload(t, "input-pretooluse-common-fields.json")
	m["tool_use_id"] = "toolu with spaces"
	if e := parseMap(t, m); e.Tool == nil || e.Tool.ID != "" {
		t.Errorf("odd tool_use_id kept: %+v", e.Tool)
	}
}

// The tool call travels on the activity signal, and that signal passes
// the daemon's own guard: an edit's paths and cwd, a shell's start (which
// had no signal before) and end, paired by id.
func TestToolOnSignal(t *testing.T) {
	g, err := guard.New(guard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want *capsule.SignalTool
	}{
		{"input-posttooluse-write.json", &capsule.SignalTool{Name: "Write", Kind: capsule.ToolEdit, ID: "toolu_01ABC123...", Paths: []string{"/path/to/file.txt"}, Cwd: "/Users/..."}},
		{"input-pretooluse-common-fields.json", &capsule.SignalTool{Name: "Bash", Kind: capsule.ToolShellStart, ID: "toolu_01ABC123...", Cwd: "/home/user/my-project"}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "claude-code", c.file))
		if err != nil {
			t.Fatal(err)
		}
		e, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Signal == nil || e.Signal.Kind != capsule.SignalActivity || e.Signal.Event != "tool" || !reflect.DeepEqual(e.Signal.Tool, c.want) {
			t.Fatalf("%s: signal %+v, tool %+v; want the tool %+v on an activity signal", c.file, e.Signal, e.Signal.Tool, c.want)
		}
		body, _ := json.Marshal(e.Signal)
		got, err := g.DecodeSignal(body)
		if err != nil {
			t.Fatalf("%s: the daemon's guard refuses the hook's signal: %v", c.file, err)
		}
		if !reflect.DeepEqual(got.Tool, c.want) {
			t.Fatalf("%s: through the guard: %+v, want %+v", c.file, got.Tool, c.want)
		}
	}
	// A PostToolUse Bash ends the window.
	m := docPayload(t, "input-pretooluse-common-fields.json")
	m["hook_event_name"] = "PostToolUse"
	if e := parseMap(t, m); e.Signal == nil || e.Signal.Tool == nil || e.Signal.Tool.Kind != capsule.ToolShellEnd {
		t.Fatalf("PostToolUse Bash: %+v", e.Signal)
	}
	// An edit whose only path is refused tells no tool, only activity.
	m = docPayload(t, "input-posttooluse-write.json")
	m["tool_input"] = map[string]any{"file_path": "/w/a\x1b[2Jb", "content": "x"}
	if e := parseMap(t, m); e.Signal == nil || e.Signal.Tool != nil {
		t.Fatalf("an edit of a refused path: %+v", e.Signal)
	}
}
