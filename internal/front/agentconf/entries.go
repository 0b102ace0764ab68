// Package agentconf is what continuityd adds to an agent's own config
// files (Claude Code's settings and MCP servers, Codex's config.toml) and
// how it takes it out again: the hooks, the status line and the MCP server,
// merged beside whatever else the file holds. The files are edited as text
// (internal/front/jsonedit, internal/front/tomledit), so every byte that is not ours
// stays as the user or another tool wrote it.
//
// What is ours is recognised by its command (`continuityd hook`,
// `continuityd statusline`, a server named continuityd that runs
// `continuityd mcp`), as written or with flags a user added: installing
// twice adds nothing the second time, and uninstalling takes out only
// those. The command's text never changes from one version to the next,
// since Codex asks its user to review a hook again when it does.
//
// The functions take a file's bytes (nil for a file that does not exist)
// and return the new bytes; reading and writing files is the caller's.
package agentconf

import (
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/front/jsonedit"
)

// The commands the agents run. They name the binary, not a path to it, so
// the text stays the same across upgrades and moves of the binary.
const (
	Binary            = "continuityd"
	HookCommand       = Binary + " hook"
	StatuslineCommand = Binary + " statusline"
	// HookTimeout is the agents' timeout for a hook, in seconds: above
	// the half second `continuityd hook` promises.
	HookTimeout = 2
	// ServerName is the MCP server's name in the agents' files.
	ServerName = "continuityd"
)

// ServerArgs are the MCP server's arguments.
var ServerArgs = []string{"mcp"}

// Hook is one hook group continuityd adds for an event.
type Hook struct {
	Event   string
	Matcher string // "" for every occurrence
}

// ClaudeHooks are Claude Code's: a session's start (answered with where
// the agent was), compactions, the end of a turn and of a session, a
// prompt, and the tools continuityd reads a change or a shell's window
// from (whose work each change is).
var ClaudeHooks = []Hook{
	{"SessionStart", "startup|resume|clear|compact"},
	{"PreCompact", "manual|auto"},
	{"PostCompact", "manual|auto"},
	{"Stop", ""},
	{"SessionEnd", ""},
	{"UserPromptSubmit", ""},
	{"PreToolUse", "Bash"},
	{"PostToolUse", "Edit|Write|MultiEdit|NotebookEdit|Bash"},
}

// CodexHooks are Codex's: the same moments (Codex has no SessionEnd), with
// apply_patch for the edits.
var CodexHooks = []Hook{
	{"SessionStart", "startup|resume|clear|compact"},
	{"PreCompact", "manual|auto"},
	{"PostCompact", "manual|auto"},
	{"Stop", ""},
	{"UserPromptSubmit", ""},
	{"PreToolUse", "Bash"},
	{"PostToolUse", "apply_patch|Bash"},
}

// HookHandler is the handler every hook group holds.
func HookHandler() jsonedit.Obj {
	return jsonedit.Obj{{K: "type", V: "command"}, {K: "command", V: HookCommand}, {K: "timeout", V: HookTimeout}}
}

// HookGroup is h as a JSON hook group (Claude Code's settings, the
// plugins' hooks.json).
func HookGroup(h Hook) jsonedit.Obj {
	var g jsonedit.Obj
	if h.Matcher != "" {
		g = append(g, jsonedit.KV{K: "matcher", V: h.Matcher})
	}
	return append(g, jsonedit.KV{K: "hooks", V: []any{HookHandler()}})
}

// Statusline is Claude Code's statusLine setting.
func Statusline() jsonedit.Obj {
	return jsonedit.Obj{{K: "type", V: "command"}, {K: "command", V: StatuslineCommand}}
}

// MCPServer is the MCP server's entry in an mcpServers object.
func MCPServer() jsonedit.Obj {
	args := make([]any, len(ServerArgs))
	for i, a := range ServerArgs {
		args[i] = a
	}
	return jsonedit.Obj{{K: "type", V: "stdio"}, {K: "command", V: Binary}, {K: "args", V: args}}
}

// IsOurs reports whether command runs continuityd's verb (hook,
// statusline, mcp), by name or by a path to the binary, with or without
// flags after it.
func IsOurs(command, verb string) bool {
	f := strings.Fields(command)
	return len(f) >= 2 && filepath.Base(f[0]) == Binary && f[1] == verb
}

// wrapFlag is how the status line keeps a user's own: it runs it and
// prints its line first.
const wrapFlag = " --wrap "

// wrap returns the status line command that keeps own.
func wrap(own string) string {
	return StatuslineCommand + wrapFlag + shellQuote(own)
}

// unwrap returns the user's own status line command held in ours, if any.
func unwrap(ours string) (own string, ok bool) {
	_, arg, found := strings.Cut(ours, wrapFlag)
	if !found {
		return "", false
	}
	words, ok := shellWords(strings.TrimSpace(arg))
	if !ok || len(words) != 1 {
		return "", false
	}
	return words[0], true
}

// shellQuote writes s as one word of sh: in single quotes, each single
// quote as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWords splits s into words as sh would (single and double quotes,
// backslashes), for the quoting a person or shellQuote may have used;
// false when s holds anything else sh would expand or act on.
func shellWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	in := false // inside a word
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return nil, false
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, false
			}
			in = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, false
			}
			i++
			cur.WriteByte(s[i])
			in = true
		case strings.IndexByte("$`;&|<>()*?[]{}~#\n", c) >= 0:
			return nil, false
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, true
}
