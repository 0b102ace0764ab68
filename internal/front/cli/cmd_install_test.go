package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(Program{}, args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// --dry-run shows the change as a diff and writes nothing; help and
// mistakes get their exit statuses; a file that does not parse is named
// with its line and column, and left as it is.
func TestInstallCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	t.Chdir(t.TempDir())

	code, out, errOut := runMain("install", "codex", "--dry-run")
	if code != ExitOK || !strings.HasPrefix(out, "--- /dev/null\n+++ ~/.codex/config.toml\n@@ -0,0 +1,") || !strings.Contains(out, "+command = \"continuityd hook\"\n") || errOut != "" {
		t.Fatalf("dry run: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, ".codex")); !os.IsNotExist(err) {
		t.Fatal("the dry run wrote")
	}
	if code, out, _ := runMain("install", "--scope", "project", "mcp"); code != ExitOK || !strings.Contains(out, ".mcp.json: added the MCP server continuityd") || !strings.Contains(out, "asks once") {
		t.Fatalf("project mcp: %d %q", code, out)
	}
	if code, out, _ := runMain("uninstall", "mcp", "--scope=project", "--dry-run"); code != ExitOK || !strings.Contains(out, "+++ /dev/null") {
		t.Fatalf("uninstall dry run: %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"install", "--help"}, ExitOK, "usage: continuityd install claude-code|codex|mcp [--scope user|project] [--dry-run]"},
		{[]string{"install"}, ExitUsage, "install: missing the agent: claude-code, codex, mcp"},
		{[]string{"install", "cursor"}, ExitUsage, `unknown agent "cursor"; it takes claude-code, codex, mcp`},
		{[]string{"install", "codx"}, ExitUsage, `unknown agent "codx"; did you mean codex?`},
		{[]string{"uninstall", "codex", "--scope", "everywhere"}, ExitUsage, `unknown scope "everywhere"`},
	} {
		if code, out, errOut := runMain(tc.args...); code != tc.code || !strings.Contains(out+errOut, tc.err) {
			t.Errorf("%q: %d %q, want %d …%s…", tc.args, code, errOut, tc.code, tc.err)
		}
	}
	settings := filepath.Join(home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o700)
	broken := "{\n  \"model\": \"opus\",\n}\n"
	os.WriteFile(settings, []byte(broken), 0o600)
	code, _, errOut = runMain("install", "claude-code")
	if code != ExitFailed || errOut != "continuityd: ~/.claude/settings.json:2:18: not valid JSON (a comma before '}' (JSON allows no trailing comma)); the file is left as it is\n" {
		t.Fatalf("broken: %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(settings); string(b) != broken {
		t.Fatal("the broken file was changed")
	}
	if _, err := os.Stat(filepath.Join(home, ".claude.json")); !os.IsNotExist(err) {
		t.Fatal("the other file was written though one did not parse")
	}
}
