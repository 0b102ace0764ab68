package integrations

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/pelletier/go-toml/v2"

	"github.com/continuityd/continuityd/internal/front/agentconf"
)

// root is the repository's root, where the marketplaces are.
const root = "../.."

func schema(t *testing.T, name string) *jsonschema.Resolved {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rs
}

func decodeJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// The plugins and marketplaces hold what the agents' documented formats
// require, with the types they give (testdata/schema, each schema naming
// its source), and each schema refuses a file that lacks what it requires.
func TestPluginsMatchTheDocumentedFormats(t *testing.T) {
	for _, c := range []struct {
		file, schema string
		broken       func(map[string]any) // makes the file what the format refuses
	}{
		{root + "/.claude-plugin/marketplace.json", "claude-marketplace.schema.json", func(m map[string]any) { delete(m, "owner") }},
		{"claude-code/plugin/.claude-plugin/plugin.json", "claude-plugin.schema.json", func(m map[string]any) { m["name"] = "Continuity D" }},
		{"claude-code/plugin/hooks/hooks.json", "hooks.schema.json", func(m map[string]any) { m["$schema"] = "x" }},
		{"claude-code/plugin/.mcp.json", "mcp.schema.json", func(m map[string]any) { m["mcpServers"] = map[string]any{"x": map[string]any{"args": []any{"mcp"}}} }},
		{"claude-code/mcp.json", "mcp.schema.json", func(m map[string]any) { m["servers"] = m["mcpServers"] }},
		{"mcp/generic.json", "mcp.schema.json", func(m map[string]any) { m["mcpServers"] = map[string]any{} }},
		{root + "/.agents/plugins/marketplace.json", "codex-marketplace.schema.json", func(m map[string]any) {
			m["plugins"].([]any)[0].(map[string]any)["source"] = map[string]any{"source": "local", "path": "../outside"}
		}},
		{"codex/plugin/.codex-plugin/plugin.json", "codex-plugin.schema.json", func(m map[string]any) { m["hooks"] = "hooks/hooks.json" }},
		{"codex/plugin/hooks/hooks.json", "hooks.schema.json", func(m map[string]any) {
			m["hooks"].(map[string]any)["Stop"] = map[string]any{"hooks": []any{}}
		}},
		{"codex/plugin/.mcp.json", "mcp.schema.json", func(m map[string]any) {
			m["mcp_servers"].(map[string]any)["continuityd"].(map[string]any)["args"] = "mcp"
		}},
	} {
		rs := schema(t, c.schema)
		doc := decodeJSON(t, c.file)
		if err := rs.Validate(doc); err != nil {
			t.Errorf("%s against %s: %v", c.file, c.schema, err)
		}
		c.broken(doc)
		if err := rs.Validate(doc); err == nil {
			t.Errorf("%s: %s accepts the broken copy", c.file, c.schema)
		}
	}
}

// Each marketplace points at its plugin (a relative path from the
// marketplace's root: the repository's), whose manifest names the same
// plugin and whose component paths exist.
func TestMarketplacesFindThePlugins(t *testing.T) {
	claude := decodeJSON(t, root+"/.claude-plugin/marketplace.json")
	for _, p := range claude["plugins"].([]any) {
		e := p.(map[string]any)
		dir := filepath.Join(root, e["source"].(string))
		m := decodeJSON(t, filepath.Join(dir, ".claude-plugin", "plugin.json"))
		if m["name"] != e["name"] {
			t.Errorf("Claude Code marketplace lists %v, the manifest names %v", e["name"], m["name"])
		}
		for _, f := range []string{"hooks/hooks.json", ".mcp.json"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("the Claude Code plugin has no %s (its default place)", f)
			}
		}
	}
	codex := decodeJSON(t, root+"/.agents/plugins/marketplace.json")
	for _, p := range codex["plugins"].([]any) {
		e := p.(map[string]any)
		dir := filepath.Join(root, e["source"].(map[string]any)["path"].(string))
		m := decodeJSON(t, filepath.Join(dir, ".codex-plugin", "plugin.json"))
		if m["name"] != e["name"] {
			t.Errorf("Codex marketplace lists %v, the manifest names %v", e["name"], m["name"])
		}
		for _, k := range []string{"hooks", "mcpServers"} {
			if _, err := os.Stat(filepath.Join(dir, m[k].(string))); err != nil {
				t.Errorf("the Codex manifest's %s: %v", k, err)
			}
		}
	}
}

// jsonValue decodes b as JSON into plain values.
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	return v
}

// tomlAsJSON decodes TOML and re-encodes it as JSON values, so that a
// TOML file and a JSON file can be compared.
func tomlAsJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := toml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(v)
	return jsonValue(t, j).(map[string]any)
}

// The snippets and the plugins hold exactly what `continuityd install`
// writes into an empty file, so that the three ways in agree.
func TestSnippetsAndPluginsAreWhatInstallWrites(t *testing.T) {
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	same := func(what string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s holds\n%s\nbut install writes\n%s", what, g, w)
		}
	}
	claude, err := agentconf.InstallClaudeSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	installed := jsonValue(t, claude.Out).(map[string]any)
	same("claude-code/settings.json", jsonValue(t, read("claude-code/settings.json")), installed)
	same("claude-code/plugin/hooks/hooks.json", jsonValue(t, read("claude-code/plugin/hooks/hooks.json")), map[string]any{"hooks": installed["hooks"]})

	mcpOut, err := agentconf.InstallMCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	servers := jsonValue(t, mcpOut.Out).(map[string]any)
	same("claude-code/mcp.json", jsonValue(t, read("claude-code/mcp.json")), servers)
	ours := servers["mcpServers"].(map[string]any)["continuityd"].(map[string]any)
	for _, f := range []string{"claude-code/plugin/.mcp.json", "mcp/generic.json", "codex/plugin/.mcp.json"} {
		doc := jsonValue(t, read(f)).(map[string]any)
		for _, wrap := range []string{"mcpServers", "mcp_servers"} {
			if s, ok := doc[wrap].(map[string]any); ok {
				got := s["continuityd"].(map[string]any)
				same(f+"'s command", []any{got["command"], got["args"]}, []any{ours["command"], ours["args"]})
			}
		}
	}

	codex, err := agentconf.InstallCodex(nil)
	if err != nil {
		t.Fatal(err)
	}
	codexInstalled := tomlAsJSON(t, codex.Out)
	same("codex/config.toml", tomlAsJSON(t, read("codex/config.toml")), codexInstalled)
	same("codex/plugin/hooks/hooks.json", jsonValue(t, read("codex/plugin/hooks/hooks.json")), map[string]any{"hooks": codexInstalled["hooks"]})
}

// The plugins' hooks, like the snippets', are events continuityd turns
// into signals, run `continuityd hook`, and match only tools it reads.
func TestPluginHooks(t *testing.T) {
	for file, want := range map[string][]string{
		"claude-code/plugin/hooks/hooks.json": {"SessionStart", "PreCompact", "PostCompact", "Stop", "SessionEnd", "PreToolUse", "PostToolUse"},
		"codex/plugin/hooks/hooks.json":       {"SessionStart", "PreCompact", "PostCompact", "Stop", "PreToolUse", "PostToolUse"},
	} {
		var s struct {
			Hooks map[string][]hookEntry `json:"hooks"`
		}
		read(t, file, &s)
		checkHooks(t, file, s.Hooks, want)
	}
}
