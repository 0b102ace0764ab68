package agentconf

import (
	"path/filepath"
	"sort"

	"github.com/continuityd/continuityd/internal/front/jsonedit"
	"github.com/continuityd/continuityd/internal/front/tomledit"
)

// JSONCommands lists the commands of continuityd's entries in a JSON file
// of Claude Code's (settings.json: its hooks and status line; .claude.json
// or .mcp.json: its MCP server), each once, for a check that they run: a
// command that names the binary is looked up on PATH, a path is that
// file.
func JSONCommands(src []byte) ([]string, error) {
	_, root, err := parseObject(src)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	if hooks := root.Get("hooks"); hooks != nil && hooks.Kind == jsonedit.Object {
		for _, m := range hooks.Members {
			if m.Value.Kind != jsonedit.Array {
				continue
			}
			for _, g := range m.Value.Elems {
				ours, hs := ourHandlers(g, "hook")
				for _, i := range ours {
					seen[hs.Elems[i].Get("command").Str] = true
				}
			}
		}
	}
	if sl := root.Get("statusLine"); sl != nil && sl.Kind == jsonedit.Object {
		if c := sl.Get("command"); c != nil && c.Kind == jsonedit.String && IsOurs(c.Str, "statusline") {
			seen[c.Str] = true
		}
	}
	if servers := root.Get("mcpServers"); servers != nil && servers.Kind == jsonedit.Object {
		if s := servers.Get(ServerName); s != nil && s.Kind == jsonedit.Object {
			if c := s.Get("command"); c != nil && c.Kind == jsonedit.String && filepath.Base(c.Str) == Binary {
				seen[c.Str] = true
			}
		}
	}
	return sorted(seen), nil
}

// CodexCommands lists the commands of continuityd's hooks and MCP server
// in a Codex config.toml, each once.
func CodexCommands(src []byte) ([]string, error) {
	d, err := tomledit.Parse(src)
	if err != nil {
		return nil, syntax(err)
	}
	seen := map[string]bool{}
	hooks, _ := d.Data["hooks"].(map[string]any)
	for event := range hooks {
		groups, _, _ := codexGroups(d.Data, event)
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			hs, _ := gm["hooks"].([]any)
			ours, _ := codexHandlers(g)
			for _, i := range ours {
				hm, _ := hs[i].(map[string]any)
				c, _ := hm["command"].(string)
				seen[c] = true
			}
		}
	}
	servers, _ := d.Data["mcp_servers"].(map[string]any)
	if s, ok := servers[ServerName]; ok && isOurCodexServer(s) {
		c, _ := s.(map[string]any)["command"].(string)
		seen[c] = true
	}
	return sorted(seen), nil
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
