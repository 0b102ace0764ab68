package agentconf

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/front/udiff"
)

var update = flag.Bool("update", false, "rewrite the expected files in testdata/golden from what the code writes")

// corpus lists the real settings files of testdata/golden/dir (see its
// SOURCES.md), not the expected outputs beside them.
func corpus(t *testing.T, dir, ext string, least int) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", "golden", dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range all {
		if !strings.Contains(filepath.Base(f), ".installed.") {
			files = append(files, f)
		}
	}
	if len(files) < least {
		t.Fatalf("testdata/golden/%s holds %d files, want at least %d", dir, len(files), least)
	}
	return files
}

// same fails with a diff when got is not want.
func same(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Errorf("%s differs from what is expected:\n%s", what, udiff.Unified("want", "got", want, got))
	}
}

// Over real users' files: install gives the expected bytes (with -update
// it writes them), install again changes nothing, uninstall gives back
// the original bytes, and uninstall from a file that holds nothing of
// ours leaves it as it is.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		dir, ext           string
		least              int
		install, uninstall func([]byte) (Result, error)
		check              func(t *testing.T, out []byte)
	}{
		{"claude-settings", ".json", 8, InstallClaudeSettings, UninstallClaudeSettings, checkClaude},
		{"codex-config", ".toml", 6, InstallCodex, UninstallCodex, checkCodex},
	} {
		for _, f := range corpus(t, c.dir, c.ext, c.least) {
			t.Run(filepath.Base(f), func(t *testing.T) {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				r, err := c.install(src)
				if err != nil {
					t.Fatal(err)
				}
				expected := strings.TrimSuffix(f, c.ext) + ".installed" + c.ext
				if *update {
					if err := os.WriteFile(expected, r.Out, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(expected)
				if err != nil {
					t.Fatalf("%v (run with -update to write it)", err)
				}
				same(t, "install", r.Out, want)
				c.check(t, r.Out)

				again, err := c.install(r.Out)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "install again", again.Out, want)
				if len(again.Changes) != 0 {
					t.Errorf("install again reports changes: %q", again.Changes)
				}

				u, err := c.uninstall(r.Out)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "uninstall", u.Out, src)
				if u.Empty {
					t.Error("uninstall says the user's file may go")
				}
				none, err := c.uninstall(src)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "uninstall from the original", none.Out, src)
			})
		}
	}
}

// checkClaude: the installed file is JSON with every hook of ours and
// continuityd's status line.
func checkClaude(t *testing.T, out []byte) {
	t.Helper()
	s := decode(t, out)
	for _, h := range ClaudeHooks {
		found := false
		for _, g := range s.Hooks[h.Event] {
			for _, hh := range g.Hooks {
				found = found || hh.Command == HookCommand && g.Matcher == h.Matcher
			}
		}
		if !found {
			t.Errorf("no hook of ours for %s", h.Event)
		}
	}
	if !IsOurs(s.StatusLine.Command, "statusline") {
		t.Errorf("status line %q", s.StatusLine.Command)
	}
}

// checkCodex: the installed file is TOML with every hook of ours, the MCP
// server, and one [features] table with hooks on.
func checkCodex(t *testing.T, out []byte) {
	t.Helper()
	m := codexData(t, out)
	for _, h := range CodexHooks {
		groups, _, _ := codexGroups(m, h.Event)
		found := false
		for _, g := range groups {
			ours, _ := codexHandlers(g)
			found = found || len(ours) > 0
		}
		if !found {
			t.Errorf("no hook of ours for %s", h.Event)
		}
	}
	if !isOurCodexServer(m["mcp_servers"].(map[string]any)[ServerName]) {
		t.Error("no MCP server of ours")
	}
	if f := m["features"].(map[string]any); f["hooks"] != true && f["codex_hooks"] != true {
		t.Errorf("features: %v", f)
	}
}

// A file that does not parse is refused with the line and column where it
// stops parsing, by install and uninstall alike.
func TestGoldenBroken(t *testing.T) {
	for _, c := range []struct {
		file              string
		line, col         int
		install, uninstal func([]byte) (Result, error)
	}{
		{"automaat-trailing-comma.json", 16, 13, InstallClaudeSettings, UninstallClaudeSettings},
		{"codex-features-twice.toml", 22, 2, InstallCodex, UninstallCodex},
	} {
		src, err := os.ReadFile(filepath.Join("testdata", "golden", "broken", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if json.Valid(src) {
			t.Fatalf("%s parses", c.file)
		}
		for _, f := range []func([]byte) (Result, error){c.install, c.uninstal} {
			_, err := f(src)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != c.line || se.Col != c.col {
				t.Errorf("%s: %v, want a syntax error at line %d, column %d", c.file, err, c.line, c.col)
			}
		}
	}
}
