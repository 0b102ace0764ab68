package agentconf

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Over the corpus of real files: what install adds is what the commands'
// reader finds (the hook, the status line with the user's own kept, the
// MCP server), and a file install has not touched holds none of ours.
func TestCommands(t *testing.T) {
	for _, c := range []struct {
		dir, ext string
		install  func([]byte) (Result, error)
		read     func([]byte) ([]string, error)
		want     func(cmds []string) bool
	}{
		{"claude-settings", ".json", InstallClaudeSettings, JSONCommands, func(cmds []string) bool {
			return len(cmds) == 2 && cmds[0] == HookCommand && IsOurs(cmds[1], "statusline")
		}},
		{"codex-config", ".toml", InstallCodex, CodexCommands, func(cmds []string) bool {
			return slices.Equal(cmds, []string{Binary, HookCommand})
		}},
	} {
		for _, f := range corpus(t, c.dir, c.ext, 1) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if cmds, err := c.read(src); err != nil || len(cmds) > 0 {
				t.Errorf("%s as found: %q, %v; want none of ours", f, cmds, err)
			}
			r, err := c.install(src)
			if err != nil {
				continue // a file install refuses is TestGolden's
			}
			if cmds, err := c.read(r.Out); err != nil || !c.want(cmds) {
				t.Errorf("%s installed: %q, %v", f, cmds, err)
			}
		}
	}
	r, _ := InstallMCP(nil)
	if cmds, err := JSONCommands(r.Out); err != nil || !slices.Equal(cmds, []string{Binary}) {
		t.Errorf("the MCP server: %q, %v", cmds, err)
	}
	// A path to the binary, as a user may have written it, is its command.
	if cmds, _ := JSONCommands([]byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/opt/cd/continuityd hook"}]}]}}`)); !slices.Equal(cmds, []string{"/opt/cd/continuityd hook"}) {
		t.Errorf("a path: %q", cmds)
	}
	if _, err := JSONCommands([]byte("{,")); err == nil || !strings.Contains(err.Error(), "line 1, column 2") {
		t.Errorf("a file that does not parse: %v, want its line and column", err)
	}
}
