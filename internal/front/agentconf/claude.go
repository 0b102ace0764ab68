package agentconf

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/front/jsonedit"
)

// emptyJSON is what a JSON file continuityd creates starts from.
var emptyJSON = []byte("{}\n")

// parseObject reads a JSON file that must hold one object; a file that
// does not exist or holds only whitespace is an empty one.
func parseObject(src []byte) ([]byte, *jsonedit.Value, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		src = emptyJSON
	}
	root, err := jsonedit.Parse(src)
	if err != nil {
		return nil, nil, syntax(err)
	}
	if root.Kind != jsonedit.Object {
		return nil, nil, shapeErrorf(src, root, "the file holds %s, not an object", root.Kind)
	}
	return src, root, nil
}

// reparse reads again a document an edit of ours produced.
func reparse(src []byte) *jsonedit.Value {
	root, err := jsonedit.Parse(src)
	if err != nil {
		panic(fmt.Sprintf("agentconf: an edit broke the document: %v", err)) // jsonedit's edits keep JSON valid
	}
	return root
}

// ourHandlers returns the indexes of the handlers of hook group g (an
// object with a "hooks" array) that run continuityd's verb, and the array.
func ourHandlers(g *jsonedit.Value, verb string) ([]int, *jsonedit.Value) {
	hs := g.Get("hooks")
	if g.Kind != jsonedit.Object || hs == nil || hs.Kind != jsonedit.Array {
		return nil, nil
	}
	var ours []int
	for i, h := range hs.Elems {
		if c := h.Get("command"); c != nil && c.Kind == jsonedit.String && IsOurs(c.Str, verb) {
			ours = append(ours, i)
		}
	}
	return ours, hs
}

// hasOurHook reports whether an event's array of hook groups runs
// `continuityd hook` already.
func hasOurHook(groups *jsonedit.Value) bool {
	for _, g := range groups.Elems {
		if ours, _ := ourHandlers(g, "hook"); len(ours) > 0 {
			return true
		}
	}
	return false
}

// InstallClaudeSettings adds continuityd's hooks and status line to a
// Claude Code settings file: each hook group after the ones already on
// its event, and a user's own status line kept by running it first.
func InstallClaudeSettings(src []byte) (Result, error) {
	out, root, err := parseObject(src)
	if err != nil {
		return Result{}, err
	}
	var r Result
	var added []string
	if hooks := root.Get("hooks"); hooks == nil {
		all := jsonedit.Obj{}
		for _, h := range ClaudeHooks {
			all = append(all, jsonedit.KV{K: h.Event, V: []any{HookGroup(h)}})
			added = append(added, h.Event)
		}
		if out, err = jsonedit.AppendMember(out, root, "hooks", all); err != nil {
			return Result{}, err
		}
	} else if hooks.Kind != jsonedit.Object {
		return Result{}, shapeErrorf(out, hooks, "hooks is %s, not an object: Claude Code reads its hooks there", hooks.Kind)
	} else {
		for _, h := range ClaudeHooks {
			hooks := reparse(out).Get("hooks")
			switch groups := hooks.Get(h.Event); {
			case groups == nil:
				out, err = jsonedit.AppendMember(out, hooks, h.Event, []any{HookGroup(h)})
			case groups.Kind != jsonedit.Array:
				return Result{}, shapeErrorf(out, groups, "hooks.%s is %s, not an array of hook groups", h.Event, groups.Kind)
			case hasOurHook(groups):
				continue
			default:
				out, err = jsonedit.AppendElem(out, groups, HookGroup(h))
			}
			if err != nil {
				return Result{}, err
			}
			added = append(added, h.Event)
		}
	}
	if len(added) > 0 {
		r.Changes = append(r.Changes, "hooks for "+strings.Join(added, ", "))
	}

	root = reparse(out)
	switch sl := root.Get("statusLine"); {
	case sl == nil:
		if out, err = jsonedit.AppendMember(out, root, "statusLine", Statusline()); err != nil {
			return Result{}, err
		}
		r.Changes = append(r.Changes, "the status line")
	case sl.Kind != jsonedit.Object:
		r.Notes = append(r.Notes, fmt.Sprintf("statusLine is %s, not an object: left as it is, without continuityd's status line", sl.Kind))
	default:
		switch c := sl.Get("command"); {
		case c == nil || c.Kind != jsonedit.String:
			r.Notes = append(r.Notes, "statusLine runs no command: left as it is, without continuityd's status line")
		case IsOurs(c.Str, "statusline"):
		default:
			out = jsonedit.ReplaceString(out, c, wrap(c.Str))
			r.Changes = append(r.Changes, "the status line, which shows yours first ("+c.Str+")")
		}
	}
	if p := root.Get("enabledPlugins"); p != nil && p.Kind == jsonedit.Object {
		for _, m := range p.Members {
			if strings.HasPrefix(m.Key, ServerName+"@") && m.Value.Str == "true" {
				r.Notes = append(r.Notes, "the plugin "+m.Key+" is enabled too: its hooks and these would both run; keep one (`continuityd uninstall claude-code`, or /plugin to disable it)")
			}
		}
	}
	if d := root.Get("disableAllHooks"); d != nil && d.Kind == jsonedit.Bool && d.Str == "true" {
		r.Notes = append(r.Notes, "disableAllHooks is true: Claude Code runs no hooks, continuityd's included, until it is false")
	}
	r.Out = out
	return r, nil
}

// UninstallClaudeSettings takes continuityd's hooks and status line out of
// a Claude Code settings file, and gives a user's own status line back.
// An event continuityd's group was the last of goes, and so does a hooks
// object left empty.
func UninstallClaudeSettings(src []byte) (Result, error) {
	if src == nil {
		return Result{}, nil
	}
	out, _, err := parseObject(src)
	if err != nil {
		return Result{}, err
	}
	var r Result
	var events []string
	for {
		root := reparse(out)
		hooks := root.Get("hooks")
		if hooks == nil || hooks.Kind != jsonedit.Object {
			break
		}
		if len(hooks.Members) == 0 {
			if len(events) > 0 {
				out = jsonedit.RemoveMember(out, root, root.Index("hooks"))
			}
			break
		}
		next, event := removeOneHook(out, hooks)
		if next == nil {
			break
		}
		out = next
		if len(events) == 0 || events[len(events)-1] != event {
			events = append(events, event)
		}
	}
	if len(events) > 0 {
		r.Changes = append(r.Changes, "hooks for "+strings.Join(events, ", "))
	}

	root := reparse(out)
	if sl := root.Get("statusLine"); sl != nil && sl.Kind == jsonedit.Object {
		if c := sl.Get("command"); c != nil && c.Kind == jsonedit.String && IsOurs(c.Str, "statusline") {
			switch own, ok := unwrap(c.Str); {
			case ok:
				out = jsonedit.ReplaceString(out, c, own)
				r.Changes = append(r.Changes, "the status line (yours is back: "+own+")")
			case strings.Contains(c.Str, wrapFlag):
				r.Notes = append(r.Notes, "the status line runs continuityd around a command it cannot read back: left as it is; set statusLine by hand")
			default:
				out = jsonedit.RemoveMember(out, root, root.Index("statusLine"))
				r.Changes = append(r.Changes, "the status line")
			}
		}
	}
	r.Out = out
	r.Empty = len(r.Changes) > 0 && jsonedit.IsEmptyObject(out)
	return r, nil
}

// removeOneHook takes one of continuityd's hook handlers out of hooks
// (the whole group when it holds only ours, the event's array with its
// last group) and returns the new document and the event, or nil.
func removeOneHook(src []byte, hooks *jsonedit.Value) ([]byte, string) {
	for mi, m := range hooks.Members {
		groups := m.Value
		if groups.Kind != jsonedit.Array {
			continue
		}
		for gi, g := range groups.Elems {
			ours, hs := ourHandlers(g, "hook")
			switch {
			case len(ours) == 0:
				continue
			case len(ours) < len(hs.Elems):
				return jsonedit.RemoveElem(src, hs, ours[0]), m.Key
			case len(groups.Elems) > 1:
				return jsonedit.RemoveElem(src, groups, gi), m.Key
			default:
				return jsonedit.RemoveMember(src, hooks, mi), m.Key
			}
		}
	}
	return nil, ""
}

// isOurServer reports whether an mcpServers entry runs `continuityd mcp`.
func isOurServer(v *jsonedit.Value) bool {
	if v.Kind != jsonedit.Object {
		return false
	}
	c, args := v.Get("command"), v.Get("args")
	return c != nil && c.Kind == jsonedit.String && filepath.Base(c.Str) == Binary &&
		args != nil && args.Kind == jsonedit.Array && len(args.Elems) > 0 && args.Elems[0].Str == ServerArgs[0]
}

// InstallMCP adds the MCP server continuityd to a JSON file's mcpServers
// (Claude Code's ~/.claude.json, a project's .mcp.json).
func InstallMCP(src []byte) (Result, error) {
	out, root, err := parseObject(src)
	if err != nil {
		return Result{}, err
	}
	var r Result
	switch servers := root.Get("mcpServers"); {
	case servers == nil:
		out, err = jsonedit.AppendMember(out, root, "mcpServers", jsonedit.Obj{{K: ServerName, V: MCPServer()}})
	case servers.Kind != jsonedit.Object:
		return Result{}, shapeErrorf(out, servers, "mcpServers is %s, not an object", servers.Kind)
	case servers.Get(ServerName) != nil:
		if !isOurServer(servers.Get(ServerName)) {
			r.Notes = append(r.Notes, "an MCP server named "+ServerName+" that does not run `continuityd mcp` is there already: left as it is")
		}
		r.Out = out
		return r, nil
	default:
		out, err = jsonedit.AppendMember(out, servers, ServerName, MCPServer())
	}
	if err != nil {
		return Result{}, err
	}
	r.Out = out
	r.Changes = append(r.Changes, "the MCP server "+ServerName)
	return r, nil
}

// UninstallMCP takes the MCP server continuityd out of a JSON file's
// mcpServers, and mcpServers with it when it is left empty.
func UninstallMCP(src []byte) (Result, error) {
	if src == nil {
		return Result{}, nil
	}
	out, root, err := parseObject(src)
	if err != nil {
		return Result{}, err
	}
	r := Result{Out: out}
	servers := root.Get("mcpServers")
	if servers == nil || servers.Kind != jsonedit.Object {
		return r, nil
	}
	i := servers.Index(ServerName)
	if i < 0 {
		return r, nil
	}
	if !isOurServer(servers.Members[i].Value) {
		r.Notes = append(r.Notes, "the MCP server named "+ServerName+" does not run `continuityd mcp`: left as it is")
		return r, nil
	}
	if len(servers.Members) == 1 {
		out = jsonedit.RemoveMember(out, root, root.Index("mcpServers"))
	} else {
		out = jsonedit.RemoveMember(out, servers, i)
	}
	r.Out = out
	r.Changes = append(r.Changes, "the MCP server "+ServerName)
	r.Empty = jsonedit.IsEmptyObject(out)
	return r, nil
}
