package guard

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/toolpaths"
)

// Bounds of a signal's tool object (whose work a change is). A hook payload
// is untrusted text: every string is bounded and shaped before the ledger
// sees it.
const (
	// MaxToolName bounds tool.name (a known tool's name in any case).
	MaxToolName = 64
	// MaxToolID bounds tool.id; real tool_use_ids are ~30 characters.
	MaxToolID = 256
	// MaxToolPaths bounds tool.paths: one call's files, as a patch names
	// them (toolpaths.MaxPathsPerCall), within the body's 64 KiB anyway.
	MaxToolPaths = toolpaths.MaxPathsPerCall
)

// knownTool reports whether name is a tool whose calls change files and
// which kind it may carry: an edit tool (Edit, Write, MultiEdit,
// NotebookEdit, apply_patch) only edit, a shell tool only shell_start and
// shell_end.
func knownTool(name, kind string) bool {
	switch {
	case toolpaths.IsShellTool(name):
		return kind == capsule.ToolShellStart || kind == capsule.ToolShellEnd
	case toolpaths.EditPathField(name) != "", name == "apply_patch":
		return kind == capsule.ToolEdit
	}
	return false
}

// decodeSignalTool decodes and checks a signal's tool object strictly:
// known members only; name a known tool with a kind it can have; id
// printable ASCII without spaces; paths (an edit's, at least one) and cwd
// shaped like file names (toolpaths.CheckPath: no control character,
// bounded), cwd absolute; at an RFC 3339 time. Credential shapes in the
// paths, the cwd and the id are redacted, never kept.
func (g *Guard) decodeSignalTool(raw []byte) (*capsule.SignalTool, *capsule.Error) {
	const code, field = capsule.CodeInvalidSignal, "tool"
	ms, err := decodeObject(raw, code, field)
	if err != nil {
		return nil, err
	}
	t := &capsule.SignalTool{}
	for _, m := range ms {
		path := joinPath(field, m.name)
		switch m.name {
		case "name", "kind", "id", "cwd", "at":
			s, err := decodeString(m.value, code, path)
			if err != nil {
				return nil, err
			}
			if err := checkText(s, MaxSignalString, code, path); err != nil {
				return nil, err
			}
			switch m.name {
			case "name":
				t.Name = s
			case "kind":
				t.Kind = s
			case "id":
				if len(s) > MaxToolID || strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
					return nil, capsule.Refuse(code, path, "must be at most %d printable ASCII characters without spaces", MaxToolID)
				}
				t.ID = g.Redact(s)
			case "cwd":
				if perr := toolpaths.CheckPath(s); perr != nil || !filepath.IsAbs(s) {
					return nil, capsule.Refuse(code, path, "must be an absolute directory path")
				}
				t.Cwd = g.Redact(s)
			case "at":
				at, perr := time.Parse(time.RFC3339Nano, s)
				if perr != nil {
					return nil, capsule.Refuse(code, path, "must be an RFC 3339 time")
				}
				t.At = at
			}
		case "paths":
			els, err := decodeArray(m.value, code, path)
			if err != nil {
				return nil, err
			}
			if len(els) > MaxToolPaths {
				return nil, capsule.Refuse(code, path, "names %d files; at most %d", len(els), MaxToolPaths)
			}
			for i, el := range els {
				ip := indexPath(path, i)
				s, err := decodeString(el, code, ip)
				if err != nil {
					return nil, err
				}
				if perr := toolpaths.CheckPath(s); perr != nil {
					return nil, capsule.Refuse(code, ip, "is not a file name: %v", perr)
				}
				if err := checkControl(s, code, ip); err != nil {
					return nil, err
				}
				t.Paths = append(t.Paths, g.Redact(s))
			}
		default:
			return nil, unknownField(code, field, m.name)
		}
	}
	switch {
	case t.Name == "":
		return nil, capsule.Refuse(code, "tool.name", "is required: the tool's name")
	case t.Kind == "":
		return nil, capsule.Refuse(code, "tool.kind", "is required: edit, shell_start or shell_end")
	case t.Kind != capsule.ToolEdit && t.Kind != capsule.ToolShellStart && t.Kind != capsule.ToolShellEnd:
		return nil, capsule.Refuse(code, "tool.kind", "must be edit, shell_start or shell_end")
	case !knownTool(t.Name, t.Kind):
		return nil, capsule.Refuse(code, "tool.name", "is not a tool that %s (Edit, Write, MultiEdit, NotebookEdit, apply_patch edit; Bash and the shell tools start and end)", t.Kind)
	case t.Kind == capsule.ToolEdit && len(t.Paths) == 0:
		return nil, capsule.Refuse(code, "tool.paths", "is required for an edit: the files it changed")
	case t.Kind != capsule.ToolEdit && len(t.Paths) > 0:
		return nil, capsule.Refuse(code, "tool.paths", "is only for an edit")
	}
	return t, nil
}
