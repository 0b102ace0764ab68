package agentconf

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/continuityd/continuityd/internal/front/tomledit"
)

// codexMarker starts the block continuityd appends to a Codex config. The
// block's tables are found again by what they hold, not by this comment
// (Codex rewrites its config and may drop comments); it tells a person
// reading the file where they came from.
const codexMarker = "# continuityd: its hooks and MCP server (`continuityd uninstall codex` takes them out)"

// addedTag ends a line continuityd added to a table of the user's, so that
// uninstall takes out that line and no other.
const addedTag = "# added by continuityd"

// codexGroups returns hooks.<event> of the decoded document, if it is an
// array of tables.
func codexGroups(data map[string]any, event string) (groups []any, present, ok bool) {
	hooks, _ := data["hooks"].(map[string]any)
	v, present := hooks[event]
	if !present {
		return nil, false, true
	}
	groups, ok = v.([]any)
	return groups, true, ok
}

// codexHandlers returns the indexes of a group's handlers that run
// continuityd's hook, and how many handlers it has.
func codexHandlers(group any) (ours []int, n int) {
	g, _ := group.(map[string]any)
	hs, _ := g["hooks"].([]any)
	for i, h := range hs {
		hm, _ := h.(map[string]any)
		if c, _ := hm["command"].(string); IsOurs(c, "hook") {
			ours = append(ours, i)
		}
	}
	return ours, len(hs)
}

func isOurCodexServer(v any) bool {
	m, _ := v.(map[string]any)
	c, _ := m["command"].(string)
	args, _ := m["args"].([]any)
	return filepath.Base(c) == Binary && len(args) > 0 && args[0] == ServerArgs[0]
}

// headerLine returns the first line of the table header with key k and
// kind, or -1.
func headerLine(d *tomledit.Doc, kind tomledit.Kind, k ...string) int {
	for _, e := range d.Exprs {
		if e.Kind == kind && tomledit.KeyIs(e.Key, k...) {
			return e.First
		}
	}
	return -1
}

// definedAt returns the first line that defines key k or a key under it,
// for an error that names where the user wrote it.
func definedAt(d *tomledit.Doc, k ...string) int {
	for _, e := range d.Exprs {
		if e.Kind != tomledit.Comment && (tomledit.KeyIs(e.Key, k...) || tomledit.Under(e.Key, k...)) {
			return e.First
		}
	}
	// Inline: the key/value under a header that holds k.
	for i, e := range d.Exprs {
		if e.Kind != tomledit.Table || len(e.Key) >= len(k) || !tomledit.KeyIs(k[:len(e.Key)], e.Key...) {
			continue
		}
		rest := k[len(e.Key):]
		for _, kv := range d.Exprs[i+1:] {
			if kv.Kind == tomledit.Table || kv.Kind == tomledit.ArrayTable {
				break
			}
			if kv.Kind == tomledit.KeyValue && len(kv.Key) <= len(rest) && tomledit.KeyIs(rest[:len(kv.Key)], kv.Key...) {
				return kv.First
			}
		}
		return e.First
	}
	return 0
}

// InstallCodex adds continuityd's hooks and MCP server to a Codex
// config.toml: a block of [[hooks.<event>]] and [mcp_servers.continuityd]
// tables at its end, and `hooks = true` in [features] (into the user's own
// table when there is one, never a second [features]). Nothing of the
// user's text moves or changes.
func InstallCodex(src []byte) (Result, error) {
	d, err := tomledit.Parse(src)
	if err != nil {
		return Result{}, syntax(err)
	}
	nl := d.Newline()
	var r Result
	var block []string

	features, hasFeatures := d.Data["features"]
	fm, _ := features.(map[string]any)
	switch {
	case fm != nil && (fm["hooks"] != nil || fm["codex_hooks"] != nil):
		for _, k := range []string{"hooks", "codex_hooks"} {
			if fm[k] == false {
				r.Notes = append(r.Notes, fmt.Sprintf("hooks are turned off ([features] %s = false, line %d): Codex runs no hooks, continuityd's included, until it is true", k, definedAt(d, "features", k)+1))
			}
		}
	case headerLine(d, tomledit.Table, "features") >= 0:
		for _, s := range d.Sections() {
			if tomledit.KeyIs(d.Key(s), "features") && d.Exprs[s.Header].Kind == tomledit.Table {
				src = d.Insert(s.Last+1, "hooks = true "+addedTag+nl)
				break
			}
		}
		if d, err = tomledit.Parse(src); err != nil {
			return Result{}, fmt.Errorf("agentconf: adding hooks = true broke the file: %v", err) // a line after a key/value of its table: not reached
		}
		r.Changes = append(r.Changes, "hooks = true in [features]")
	case hasFeatures:
		r.Notes = append(r.Notes, fmt.Sprintf("features is not a [features] table (line %d): left as it is; Codex has run hooks by default since 0.124, an older one needs hooks = true in it", definedAt(d, "features")+1))
	default:
		block = append(block, "[features] "+addedTag, "hooks = true "+addedTag, "")
		r.Changes = append(r.Changes, "hooks = true in [features]")
	}

	if h, present := d.Data["hooks"]; present {
		if _, ok := h.(map[string]any); !ok {
			return Result{}, &ShapeError{Line: definedAt(d, "hooks") + 1, Col: 1, Msg: "hooks is not a table: Codex reads its hooks there"}
		}
	}
	var added []string
	for _, h := range CodexHooks {
		groups, present, ok := codexGroups(d.Data, h.Event)
		if !ok {
			return Result{}, &ShapeError{Line: definedAt(d, "hooks", h.Event) + 1, Col: 1, Msg: fmt.Sprintf("hooks.%s is not an array of tables", h.Event)}
		}
		if present {
			mine := false
			for _, g := range groups {
				if ours, _ := codexHandlers(g); len(ours) > 0 {
					mine = true
				}
			}
			if mine {
				continue
			}
			if headerLine(d, tomledit.ArrayTable, "hooks", h.Event) < 0 {
				return Result{}, &ShapeError{Line: definedAt(d, "hooks", h.Event) + 1, Col: 1,
					Msg: fmt.Sprintf("hooks.%s is written as an inline array, which [[hooks.%s]] tables cannot extend: add continuityd's hook to it by hand (packaging/integrations/codex/config.toml has it), or write yours as [[hooks.%s]] tables", h.Event, h.Event, h.Event)}
			}
		}
		block = append(block, "[[hooks."+h.Event+"]]")
		if h.Matcher != "" {
			block = append(block, "matcher = "+tomledit.Quote(h.Matcher))
		}
		block = append(block, "[[hooks."+h.Event+".hooks]]", `type = "command"`, "command = "+tomledit.Quote(HookCommand), fmt.Sprintf("timeout = %d", HookTimeout), "")
		added = append(added, h.Event)
	}
	if len(added) > 0 {
		r.Changes = append(r.Changes, "hooks for "+strings.Join(added, ", "))
	}

	servers, _ := d.Data["mcp_servers"].(map[string]any)
	if s, present := servers[ServerName]; present {
		if !isOurCodexServer(s) {
			r.Notes = append(r.Notes, "an MCP server named "+ServerName+" that does not run `continuityd mcp` is there already: left as it is")
		}
	} else {
		args := make([]string, len(ServerArgs))
		for i, a := range ServerArgs {
			args[i] = tomledit.Quote(a)
		}
		block = append(block, "[mcp_servers."+ServerName+"]", "command = "+tomledit.Quote(Binary), "args = ["+strings.Join(args, ", ")+"]")
		r.Changes = append(r.Changes, "the MCP server "+ServerName)
	}

	r.Out = src
	if len(block) > 0 {
		for len(block) > 0 && block[len(block)-1] == "" {
			block = block[:len(block)-1]
		}
		r.Out = d.Append(codexMarker + nl + strings.Join(block, nl) + nl)
	}
	if _, err := tomledit.Parse(r.Out); err != nil {
		return Result{}, fmt.Errorf("continuityd's tables do not fit in this file (%v): a hooks or mcp_servers written as an inline table cannot be extended by tables; add them by hand (packaging/integrations/codex/config.toml has them)", err)
	}
	return r, nil
}

// UninstallCodex takes continuityd's hooks, MCP server and the lines it
// added to [features] out of a Codex config.toml, and nothing else: a
// group that holds a user's hook beside continuityd's keeps the user's.
func UninstallCodex(src []byte) (Result, error) {
	if src == nil {
		return Result{}, nil
	}
	d, err := tomledit.Parse(src)
	if err != nil {
		return Result{}, syntax(err)
	}
	var r Result
	del := make([]bool, len(d.Lines))
	secs := d.Sections()
	mark := func(s tomledit.Section) {
		for i := s.First; i <= s.Last; i++ {
			del[i] = true
		}
	}
	// under returns the sections after index i whose keys lie under k.
	under := func(i int, k ...string) []tomledit.Section {
		var out []tomledit.Section
		for _, s := range secs[i+1:] {
			if !tomledit.Under(d.Key(s), k...) {
				break
			}
			out = append(out, s)
		}
		return out
	}

	var events []string
	for _, h := range hookEvents(d.Data) {
		groups, _, _ := codexGroups(d.Data, h)
		var headers []int // the sections of [[hooks.<event>]], in order
		for i, s := range secs {
			if s.Header >= 0 && d.Exprs[s.Header].Kind == tomledit.ArrayTable && tomledit.KeyIs(d.Key(s), "hooks", h) {
				headers = append(headers, i)
			}
		}
		touched := false
		for gi, g := range groups {
			ours, n := codexHandlers(g)
			if len(ours) == 0 {
				continue
			}
			if len(headers) != len(groups) {
				r.Notes = append(r.Notes, fmt.Sprintf("hooks.%s is written inline: take `%s` out of it by hand", h, HookCommand))
				break
			}
			subs := under(headers[gi], "hooks", h)
			if len(ours) == n {
				mark(secs[headers[gi]])
				for _, s := range subs {
					mark(s)
				}
				touched = true
				continue
			}
			var handlers []tomledit.Section
			for _, s := range subs {
				if d.Exprs[s.Header].Kind == tomledit.ArrayTable && tomledit.KeyIs(d.Key(s), "hooks", h, "hooks") {
					handlers = append(handlers, s)
				}
			}
			if len(handlers) != n {
				r.Notes = append(r.Notes, fmt.Sprintf("a hooks.%s group holds `%s` inline beside other hooks: take it out by hand", h, HookCommand))
				continue
			}
			for _, j := range ours {
				mark(handlers[j])
			}
			touched = true
		}
		if touched {
			events = append(events, h)
		}
	}
	if len(events) > 0 {
		r.Changes = append(r.Changes, "hooks for "+strings.Join(events, ", "))
	}

	servers, _ := d.Data["mcp_servers"].(map[string]any)
	if s, present := servers[ServerName]; present && isOurCodexServer(s) {
		found := false
		for i, sec := range secs {
			if tomledit.KeyIs(d.Key(sec), "mcp_servers", ServerName) {
				mark(sec)
				for _, sub := range under(i, "mcp_servers", ServerName) {
					mark(sub)
				}
				found = true
			}
		}
		if found {
			r.Changes = append(r.Changes, "the MCP server "+ServerName)
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("mcp_servers.%s is not a table of its own (line %d): take it out by hand", ServerName, definedAt(d, "mcp_servers", ServerName)+1))
		}
	}

	for _, s := range secs {
		if !tomledit.KeyIs(d.Key(s), "features") {
			continue
		}
		left := 0
		for _, i := range s.Body {
			e := d.Exprs[i]
			switch {
			case e.Kind == tomledit.KeyValue && tomledit.KeyIs(e.Key, "hooks") && e.Comment == addedTag:
				del[e.First] = true
				r.Changes = append(r.Changes, "hooks = true in [features]")
			case e.Kind == tomledit.KeyValue:
				left++
			}
		}
		if left == 0 && d.Exprs[s.Header].Comment == addedTag {
			mark(s)
		}
	}
	for _, e := range d.Exprs {
		if e.Kind == tomledit.Comment && e.Comment == codexMarker {
			del[e.First] = true
		}
	}
	r.Out = d.Remove(del)
	r.Empty = len(r.Changes) > 0 && len(bytes.TrimSpace(r.Out)) == 0
	return r, nil
}

// hookEvents returns the events of the document's hooks table that hold
// arrays (not [hooks.state], Codex's own record of what a user trusted),
// in the order continuityd installs them, then any others.
func hookEvents(data map[string]any) []string {
	hooks, _ := data["hooks"].(map[string]any)
	var out []string
	seen := map[string]bool{}
	for _, h := range CodexHooks {
		if _, ok := hooks[h.Event].([]any); ok {
			out = append(out, h.Event)
			seen[h.Event] = true
		}
	}
	var others []string
	for k, v := range hooks {
		if _, ok := v.([]any); ok && !seen[k] {
			others = append(others, k)
		}
	}
	sort.Strings(others)
	return append(out, others...)
}
