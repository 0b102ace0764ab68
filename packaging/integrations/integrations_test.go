package integrations

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/continuityd/continuityd/internal/hook"
)

// hookEntry is the shape both Claude Code and Codex use for a hook group.
type hookEntry struct {
	Matcher string `json:"matcher" toml:"matcher"`
	Hooks   []struct {
		Type    string `json:"type" toml:"type"`
		Command string `json:"command" toml:"command"`
		Timeout int    `json:"timeout" toml:"timeout"`
	} `json:"hooks" toml:"hooks"`
}

// checkHooks: every event is one continuityd turns into a signal, every
// command is `continuityd hook`, and timeouts leave the hook its budget.
func checkHooks(t *testing.T, file string, events map[string][]hookEntry, want []string) {
	t.Helper()
	for _, ev := range want {
		if len(events[ev]) == 0 {
			t.Fatalf("%s: no %s hook", file, ev)
		}
	}
	for ev, groups := range events {
		payload := fmt.Sprintf(`{"hook_event_name":%q,"session_id":"s","cwd":"/w","transcript_path":"/t.jsonl","source":"startup","trigger":"auto","reason":"other"}`, ev)
		e, err := hook.Parse([]byte(payload))
		if ev != "PreToolUse" && (err != nil || e.Signal == nil) {
			t.Fatalf("%s: event %s means nothing to continuityd (%v)", file, ev, err)
		}
		for _, g := range groups {
			checkToolMatcher(t, file, ev, g.Matcher)
			for _, h := range g.Hooks {
				if h.Type != "command" || h.Command != "continuityd hook" || h.Timeout < 1 {
					t.Fatalf("%s: %s hook %+v", file, ev, h)
				}
			}
		}
	}
}

func TestClaudeCodeSettings(t *testing.T) {
	var s struct {
		Hooks      map[string][]hookEntry `json:"hooks"`
		StatusLine struct {
			Type, Command string
		} `json:"statusLine"`
	}
	read(t, "claude-code/settings.json", &s)
	checkHooks(t, "claude-code/settings.json", s.Hooks, []string{"SessionStart", "PreCompact", "PostCompact", "Stop", "SessionEnd", "PreToolUse", "PostToolUse"})
	if s.StatusLine.Type != "command" || s.StatusLine.Command != "continuityd statusline" {
		t.Fatalf("statusLine: %+v", s.StatusLine)
	}
}

func TestMCPClientSnippets(t *testing.T) {
	for _, f := range []string{"claude-code/mcp.json", "mcp/generic.json"} {
		var s struct {
			MCPServers map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"mcpServers"`
		}
		read(t, f, &s)
		c := s.MCPServers["continuityd"]
		if c.Command != "continuityd" || strings.Join(c.Args, " ") != "mcp" {
			t.Fatalf("%s: %+v", f, c)
		}
	}
}

func TestCodexConfig(t *testing.T) {
	raw, err := os.ReadFile("codex/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Features struct {
			Hooks bool `toml:"hooks"`
		} `toml:"features"`
		Hooks      map[string][]hookEntry `toml:"hooks"`
		MCPServers map[string]struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
		} `toml:"mcp_servers"`
	}
	dec := toml.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("codex/config.toml: %v", err)
	}
	if !s.Features.Hooks {
		t.Fatal("codex/config.toml does not enable hooks")
	}
	checkHooks(t, "codex/config.toml", s.Hooks, []string{"SessionStart", "PreCompact", "PostCompact", "Stop", "PreToolUse", "PostToolUse"})
	if c := s.MCPServers["continuityd"]; c.Command != "continuityd" || strings.Join(c.Args, " ") != "mcp" {
		t.Fatalf("mcp_servers: %+v", c)
	}
}

func read(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// toolInputs are a tool_input each tool the snippets match may carry.
var toolInputs = map[string]string{
	"Edit":         `{"file_path":"/w/a.go","old_string":"x","new_string":"y"}`,
	"Write":        `{"file_path":"/w/a.go","content":"x"}`,
	"MultiEdit":    `{"file_path":"/w/a.go","edits":[]}`,
	"NotebookEdit": `{"notebook_path":"/w/n.ipynb","new_source":"x"}`,
	"apply_patch":  `{"command":"*** Begin Patch\n*** Add File: a.go\n+x\n*** End Patch"}`,
	"Bash":         `{"command":"make"}`,
}

// checkToolMatcher: a tool event's matcher names only tools continuityd
// reads a change or a shell window from (attribution), each of which
// Parse turns into a tool call on the signal.
func checkToolMatcher(t *testing.T, file, ev, matcher string) {
	t.Helper()
	if ev != "PreToolUse" && ev != "PostToolUse" {
		return
	}
	if matcher == "" {
		t.Fatalf("%s: %s without a matcher runs the hook for every tool", file, ev)
	}
	for _, name := range strings.Split(matcher, "|") {
		in, ok := toolInputs[name]
		if !ok {
			t.Fatalf("%s: %s matches %q, a tool continuityd reads nothing from", file, ev, name)
		}
		payload := fmt.Sprintf(`{"hook_event_name":%q,"session_id":"s","cwd":"/w","tool_name":%q,"tool_input":%s,"tool_use_id":"toolu_1"}`, ev, name, in)
		e, err := hook.Parse([]byte(payload))
		if err != nil || e.Signal == nil || e.Signal.Tool == nil {
			t.Fatalf("%s: %s of %s carries no tool call (%v)", file, ev, name, err)
		}
	}
}
