package agentconf

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// settings is the shape of Claude Code's settings this package writes.
type settings struct {
	Hooks map[string][]struct {
		Matcher string
		Hooks   []struct {
			Type, Command string
			Timeout       int
		}
	}
	StatusLine struct{ Type, Command string }
}

func decode(t *testing.T, b []byte) settings {
	t.Helper()
	var s settings
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	return s
}

// Into no file at all: every hook and the status line; again: nothing;
// out: nothing left, and the file may go.
func TestClaudeSettingsFromNothing(t *testing.T) {
	r, err := InstallClaudeSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := decode(t, r.Out)
	if len(s.Hooks) != len(ClaudeHooks) || s.StatusLine.Command != StatuslineCommand {
		t.Fatalf("installed %+v", s)
	}
	for _, h := range ClaudeHooks {
		g := s.Hooks[h.Event]
		if len(g) != 1 || g[0].Matcher != h.Matcher || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != HookCommand || g[0].Hooks[0].Timeout != HookTimeout {
			t.Errorf("%s: %+v", h.Event, g)
		}
	}
	again, err := InstallClaudeSettings(r.Out)
	if err != nil || again.Changed(r.Out) || len(again.Changes) != 0 {
		t.Fatalf("twice: %v %q changed=%v", err, again.Changes, again.Changed(r.Out))
	}
	u, err := UninstallClaudeSettings(r.Out)
	if err != nil || string(u.Out) != "{}\n" || !u.Empty {
		t.Fatalf("uninstalled: %v %q empty=%v", err, u.Out, u.Empty)
	}
	if u, _ := UninstallClaudeSettings(nil); u.Out != nil || u.Empty {
		t.Fatal("uninstall from no file")
	}
}

// A user's own status line keeps running (first), and comes back as it
// was, however it is quoted.
func TestStatuslineWrapped(t *testing.T) {
	for _, own := range []string{
		"~/.claude/statusline.sh",
		`bash -c 'plugin_dir=$(ls -d "${CLAUDE_CONFIG_DIR:-$HOME/.claude}"/x 2>/dev/null | awk -F/ '"'"'{ print $(NF-1) "\t" $(0) }'"'"'); exec bun "${plugin_dir}src/index.ts"'`,
		`jq -r '"[\(.model.display_name)] \(.context_window.used_percentage // 0)% context"'`,
	} {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as a person or Claude Code writes it: > as it is
		enc.Encode(map[string]any{"statusLine": map[string]any{"type": "command", "command": own, "padding": 0}})
		src := []byte(buf.String())
		r, err := InstallClaudeSettings(src)
		if err != nil {
			t.Fatal(err)
		}
		cmd := decode(t, r.Out).StatusLine.Command
		if !IsOurs(cmd, "statusline") || !strings.Contains(strings.Join(r.Changes, " "), own) {
			t.Fatalf("%q: %q %q", own, cmd, r.Changes)
		}
		// sh hands the wrapped command to continuityd as one argument.
		words, err := exec.Command("sh", "-c", "set -- "+strings.TrimPrefix(cmd, StatuslineCommand+" ")+`; printf %s "$2"`).Output()
		if err != nil || string(words) != own {
			t.Fatalf("sh reads the wrapped command as %q (%v), want %q", words, err, own)
		}
		u, err := UninstallClaudeSettings(r.Out)
		if err != nil || string(u.Out) != string(src) {
			t.Fatalf("back: %v\n%s\nwant\n%s", err, u.Out, src)
		}
	}
}

// shellQuote and shellWords agree with each other on any text.
func TestShellQuoteRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("ab '\"\\$`;|&<>(){}*?~#\t\né")
	for range 2000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		words, ok := shellWords(shellQuote(s))
		if !ok || len(words) != 1 || words[0] != s {
			t.Fatalf("%q → %q → %q %v", s, shellQuote(s), words, ok)
		}
	}
	for in, want := range map[string][]string{`a "b c" 'd'`: {"a", "b c", "d"}, `"x\"y"`: {`x"y`}, `a\ b`: {"a b"}} {
		if got, ok := shellWords(in); !ok || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("shellWords(%q) = %q %v", in, got, ok)
		}
	}
	for _, in := range []string{`$(x)`, `"$HOME"`, `a;b`, `'open`} {
		if _, ok := shellWords(in); ok {
			t.Errorf("shellWords(%q) read what sh would expand", in)
		}
	}
}

// A user who put continuityd's handler into a group of their own keeps
// their handler; other tools' hooks on the same events stay.
func TestClaudeMixedGroups(t *testing.T) {
	src := `{
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Write",
        "hooks": [
          {"type": "command", "command": "gofmt -w"},
          {"type": "command", "command": "continuityd hook --agent x"}
        ]
      }
    ]
  }
}
`
	r, err := InstallClaudeSettings([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s := decode(t, r.Out); len(s.Hooks["PostToolUse"]) != 1 || len(s.Hooks["Stop"]) != 1 {
		t.Fatalf("a hook of ours with flags counts as ours: %s", r.Out)
	}
	u, err := UninstallClaudeSettings(r.Out)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(src, ",\n          {\"type\": \"command\", \"command\": \"continuityd hook --agent x\"}", "", 1)
	if string(u.Out) != want || u.Empty {
		t.Fatalf("uninstalled:\n%s\nwant\n%s", u.Out, want)
	}
}

// What continuityd cannot merge into is refused, naming where.
func TestClaudeRefusals(t *testing.T) {
	for src, want := range map[string]string{
		"[]":                                 "line 1, column 1: the file holds an array",
		"{\n  \"hooks\": []\n}":              "line 2, column 12: hooks is an array, not an object",
		"{\"hooks\": {\"Stop\": {}}}":        "line 1, column 20: hooks.Stop is an object",
		"{\n  \"a\": 1,\n}":                  "line 2, column 9: a comma before '}'",
		"{\"mcpServers\": \"x\", \"b\": [1}": "line 1, column 28: unexpected \"}\"",
	} {
		_, err := InstallClaudeSettings([]byte(src))
		var se *SyntaxError
		var sh *ShapeError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &se) && !errors.As(err, &sh) {
			t.Errorf("%q: %v, want …%s…", src, err, want)
		}
	}
	r, err := InstallClaudeSettings([]byte(`{"statusLine": "x", "disableAllHooks": true, "enabledPlugins": {"continuityd@continuityd": true, "x@y": true}}`))
	if err != nil || len(r.Notes) != 3 || !strings.Contains(r.Notes[1], "continuityd@continuityd is enabled too") {
		t.Fatalf("notes: %v %q", err, r.Notes)
	}
}

func TestMCP(t *testing.T) {
	r, err := InstallMCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		MCPServers map[string]struct {
			Type, Command string
			Args          []string
		}
	}
	if json.Unmarshal(r.Out, &m) != nil || m.MCPServers[ServerName].Command != Binary || strings.Join(m.MCPServers[ServerName].Args, " ") != "mcp" {
		t.Fatalf("%s", r.Out)
	}
	if again, _ := InstallMCP(r.Out); again.Changed(r.Out) {
		t.Fatal("twice")
	}
	if u, _ := UninstallMCP(r.Out); string(u.Out) != "{}\n" || !u.Empty {
		t.Fatalf("out: %q", u.Out)
	}
	other := `{"mcpServers": {"continuityd": {"command": "something-else"}}}`
	r, err = InstallMCP([]byte(other))
	if err != nil || r.Changed([]byte(other)) || len(r.Notes) != 1 {
		t.Fatalf("someone else's continuityd: %v %q", err, r.Notes)
	}
	if u, _ := UninstallMCP([]byte(other)); u.Changed([]byte(other)) || len(u.Notes) != 1 {
		t.Fatal("took out a server that is not ours")
	}
}

func codexData(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	return m
}

func TestCodex(t *testing.T) {
	r, err := InstallCodex(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := codexData(t, r.Out)
	if m["features"].(map[string]any)["hooks"] != true || len(m["hooks"].(map[string]any)) != len(CodexHooks) || !isOurCodexServer(m["mcp_servers"].(map[string]any)[ServerName]) {
		t.Fatalf("%s", r.Out)
	}
	if again, _ := InstallCodex(r.Out); again.Changed(r.Out) {
		t.Fatalf("twice:\n%s", again.Out)
	}
	if u, _ := UninstallCodex(r.Out); len(u.Out) != 0 || !u.Empty {
		t.Fatalf("out: %q", u.Out)
	}

	// [features] of the user's own gets the key; never a second table.
	src := "notify = [\"n\"]\n\n[features]\nweb_search_request = true\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n"
	r, err = InstallCodex([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Out), "[features]\nweb_search_request = true\nhooks = true "+addedTag+"\n\n[projects") || strings.Count(string(r.Out), "[features]") != 1 {
		t.Fatalf("features:\n%s", r.Out)
	}
	if u, _ := UninstallCodex(r.Out); string(u.Out) != src || u.Empty {
		t.Fatalf("back:\n%s", u.Out)
	}

	// Hooks on or off already: left to the user.
	for src, notes := range map[string]int{"[features]\ncodex_hooks = true\n": 0, "[features]\nhooks = false\n": 1} {
		r, err := InstallCodex([]byte(src))
		if err != nil || strings.Contains(string(r.Out), addedTag) || len(r.Notes) != notes {
			t.Fatalf("%q: %v %q\n%s", src, err, r.Notes, r.Out)
		}
	}

	// A user's own hook on the same event, and Codex's trust records after
	// the block, stay; a group holding both keeps the user's handler.
	src = "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"say done\"\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"continuityd hook\"\n"
	r, err = InstallCodex([]byte(src))
	if err != nil || strings.Contains(string(r.Out), "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"continuityd hook\"") {
		t.Fatalf("a Stop hook of ours is there already: %v\n%s", err, r.Out)
	}
	withState := append(r.Out, "\n[hooks.state.\"/c.toml:stop:0:0\"]\ntrusted_hash = \"sha256:x\"\n"...)
	u, err := UninstallCodex(withState)
	if err != nil {
		t.Fatal(err)
	}
	um := codexData(t, u.Out)
	stop := um["hooks"].(map[string]any)["Stop"].([]any)
	if len(stop) != 1 || len(stop[0].(map[string]any)["hooks"].([]any)) != 1 || !strings.Contains(string(u.Out), "say done") || !strings.Contains(string(u.Out), "trusted_hash") || strings.Contains(string(u.Out), "continuityd") {
		t.Fatalf("uninstalled:\n%s", u.Out)
	}

	// What tables cannot extend is refused with where it is.
	for src, want := range map[string]string{
		"[hooks]\nStop = [{ hooks = [{ type = \"command\", command = \"x\" }] }]\n": "line 2, column 1: hooks.Stop is written as an inline array",
		"hooks = \"x\"\n": "line 1, column 1: hooks is not a table",
		"mcp_servers = { a = { command = \"x\" } }\n": "do not fit",
		"[features]\na = 1\n[features]\n":             "line 3, column 2",
	} {
		if _, err := InstallCodex([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want …%s…", src, err, want)
		}
	}
}
