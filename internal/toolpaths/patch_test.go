package toolpaths

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The patch envelope of Codex's apply_patch, as its own test scenarios
// write it (openai/codex codex-rs/apply-patch/tests/fixtures/scenarios,
// 002_multiple_operations, 004_move_to_new_directory and
// 018_whitespace_padded_patch_markers).
const (
	patchMultiple = "*** Begin Patch\n*** Add File: nested/new.txt\n+created\n*** Delete File: delete.txt\n*** Update File: modify.txt\n@@\n-line2\n+changed\n*** End Patch\n"
	patchMove     = "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-old content\n+new content\n*** End Patch\n"
	patchPadded   = " *** Begin Patch\n*** Update File: file.txt\n@@\n-one\n+two\n*** End Patch \n"
)

func TestPatchPaths(t *testing.T) {
	for name, c := range map[string]struct {
		patch string
		want  []string
	}{
		"add delete update":             {patchMultiple, []string{"nested/new.txt", "delete.txt", "modify.txt"}},
		"move":                          {patchMove, []string{"old/name.txt", "renamed/dir/name.txt"}},
		"padded markers":                {patchPadded, []string{"file.txt"}},
		"heredoc in shell":              {"apply_patch <<'EOF'\r\n*** Begin Patch\r\n*** Update File: a b.go\r\n@@\r\n-x\r\n+y\r\n*** End Patch\r\nEOF", []string{"a b.go"}},
		"content lines are not markers": {"*** Begin Patch\n*** Add File: x.md\n+*** Delete File: y.md\n*** End Patch", []string{"x.md"}},
		"no markers":                    {"not a patch", nil},
		"twice named":                   {"*** Update File: a\n*** Update File: a", []string{"a"}},
	} {
		got, refused := PatchPaths(c.patch)
		if !reflect.DeepEqual(got, c.want) || len(refused) != 0 {
			t.Errorf("%s: PatchPaths = %q (refused %q), want %q", name, got, refused, c.want)
		}
	}
	// A control character in a name is refused and named, escaped.
	got, refused := PatchPaths("*** Add File: ok.txt\n*** Add File: bad\x1b[2J.txt\n")
	if !reflect.DeepEqual(got, []string{"ok.txt"}) || len(refused) != 1 || strings.Contains(refused[0], "\x1b") {
		t.Errorf("control character: %q, refused %q", got, refused)
	}
	// More paths than a call may claim are cut, and the cut is said.
	var b strings.Builder
	for i := range MaxPathsPerCall + 5 {
		b.WriteString("*** Add File: f/" + strconv.Itoa(i) + "\n")
	}
	got, refused = PatchPaths(b.String())
	if len(got) != MaxPathsPerCall || len(refused) != 1 {
		t.Errorf("a huge patch gave %d paths, refused %q", len(got), refused)
	}
}
