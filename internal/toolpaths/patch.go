package toolpaths

import (
	"fmt"
	"strings"
)

// Codex edits files with apply_patch, whose input is a patch in its own
// envelope (codex-rs/apply-patch; the scenarios in its tests):
//
//	*** Begin Patch
//	*** Add File: nested/new.txt
//	+created
//	*** Delete File: delete.txt
//	*** Update File: old/name.txt
//	*** Move to: renamed/dir/name.txt
//	@@
//	-old content
//	+new content
//	*** End Patch
//
// The paths are what the patch changes: an added, deleted or updated file,
// and both ends of a move. Codex accepts the markers padded with
// whitespace, and the patch may sit inside a shell heredoc
// (`apply_patch <<'EOF'` in older versions' shell calls), so markers are
// looked for on every line, trimmed.

// Patch markers that name a file.
var patchMarkers = []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"}

// PatchPaths returns the paths an apply_patch input names, in order, each
// once, as written (relative to the agent's cwd, or absolute). A path the
// shape check refuses is left out and reported in refused (the reason,
// the path escaped); more than MaxPathsPerCall paths are cut there, and
// the cut is reported too. A text with no markers names no path.
func PatchPaths(patch string) (paths []string, refused []string) {
	seen := map[string]bool{}
	for line := range strings.SplitSeq(patch, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "*** ") {
			continue
		}
		for _, m := range patchMarkers {
			p, ok := strings.CutPrefix(line, m)
			if !ok {
				continue
			}
			p = strings.TrimSpace(p)
			if err := CheckPath(p); err != nil {
				refused = append(refused, err.Error())
				break
			}
			if seen[p] {
				break
			}
			if len(paths) == MaxPathsPerCall {
				refused = append(refused, fmt.Sprintf("the patch names more than %d paths; the rest are not claimed", MaxPathsPerCall))
				return paths, refused
			}
			seen[p] = true
			paths = append(paths, p)
			break
		}
	}
	return paths, refused
}

// EditPathField returns the tool_input field that names the file of one of
// Claude Code's edit tools (Edit, Write, MultiEdit: file_path;
// NotebookEdit: notebook_path), "" for any other tool.
func EditPathField(tool string) string {
	switch tool {
	case "Edit", "Write", "MultiEdit":
		return "file_path"
	case "NotebookEdit":
		return "notebook_path"
	}
	return ""
}

// IsShellTool reports whether a tool name is a shell tool's: Claude Code's
// Bash, and Codex's, which its hooks send as Bash too (codex-rs
// HookToolName::bash) and its rollouts name shell, shell_command,
// exec_command or local_shell.
func IsShellTool(name string) bool {
	switch name {
	case "Bash", "shell", "shell_command", "exec_command", "local_shell":
		return true
	}
	return false
}
