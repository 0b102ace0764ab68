package agentfiles

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/front/agentconf"
)

// golden is the real users' files of internal/front/agentconf (see its
// testdata/golden/SOURCES.md).
const golden = "../agentconf/testdata/golden"

func env(home, dir string, vars map[string]string) Env {
	return Env{Home: home, Dir: dir, Getenv: func(k string) string { return vars[k] }}
}

func TestTargets(t *testing.T) {
	paths := func(ts []Target, err error) string {
		if err != nil {
			return err.Error()
		}
		var p []string
		for _, t := range ts {
			p = append(p, t.Path)
		}
		return strings.Join(p, " ")
	}
	e := env("/h", "/p", nil)
	for _, tc := range []struct{ agent, scope, want string }{
		{"claude-code", "user", "/h/.claude/settings.json /h/.claude.json"},
		{"claude-code", "project", "/p/.claude/settings.json /p/.mcp.json"},
		{"codex", "user", "/h/.codex/config.toml"},
		{"codex", "project", "/p/.codex/config.toml"},
		{"mcp", "user", "/h/.claude.json"},
		{"mcp", "project", "/p/.mcp.json"},
		{"cursor", "user", `unknown agent "cursor": want claude-code, codex, mcp`},
		{"codex", "system", `unknown scope "system": want user or project`},
	} {
		if got := paths(Targets(tc.agent, tc.scope, e)); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.agent, tc.scope, got, tc.want)
		}
	}
	e = env("/h", "/p", map[string]string{"CLAUDE_CONFIG_DIR": "/c", "CODEX_HOME": "/x"})
	if got := paths(Targets("claude-code", "user", e)) + " " + paths(Targets("codex", "user", e)); got != "/c/settings.json /c/.claude.json /x/config.toml" {
		t.Errorf("with CLAUDE_CONFIG_DIR and CODEX_HOME: %s", got)
	}
}

// apply plans and applies every change, failing on an error.
func apply(t *testing.T, targets []Target, install bool, now time.Time) ([]Change, []string) {
	t.Helper()
	changes, err := Plan(targets, install)
	if err != nil {
		t.Fatal(err)
	}
	var backups []string
	for _, c := range changes {
		b, err := c.Apply(now)
		if err != nil {
			t.Fatal(err)
		}
		if b != "" {
			backups = append(backups, b)
		}
	}
	return changes, backups
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Into a home with nothing: the files and their directory are made,
// private; again, nothing changes; out again, the files are gone and no
// backup of them is left.
func TestFreshHome(t *testing.T) {
	home := t.TempDir()
	targets, _ := Targets("claude-code", "user", env(home, "", nil))
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	changes, backups := apply(t, targets, true, now)
	if len(changes) != 2 || len(backups) != 0 || changes[0].Existed {
		t.Fatalf("install: %d changes, backups %v", len(changes), backups)
	}
	if m := mode(t, filepath.Join(home, ".claude", "settings.json")); m.Perm() != 0o600 {
		t.Errorf("settings.json mode %v", m)
	}
	if m := mode(t, filepath.Join(home, ".claude")); m.Perm() != 0o700 {
		t.Errorf(".claude mode %v", m)
	}
	if m := mode(t, filepath.Join(home, ".claude.json")); m.Perm() != 0o600 {
		t.Errorf(".claude.json mode %v", m)
	}
	again, _ := Plan(targets, true)
	for _, c := range again {
		if c.Changed() {
			t.Errorf("install again changes %s:\n%s", c.Path, c.Diff(c.Path))
		}
	}
	if _, backups := apply(t, targets, false, now); len(backups) != 0 {
		t.Errorf("backups of files that held only continuityd's: %v", backups)
	}
	left, _ := filepath.Glob(filepath.Join(home, ".claude*"))
	if len(left) != 1 || left[0] != filepath.Join(home, ".claude") {
		t.Errorf("left in the home: %v", left)
	}
	if names, _ := os.ReadDir(filepath.Join(home, ".claude")); len(names) != 0 {
		t.Errorf("left in .claude: %v", names)
	}
}

// Over real users' files on disk: the file's mode is kept, a backup of
// the original bytes (with the same mode) is beside it, the result is the
// golden one, and uninstall gives back the original bytes.
func TestRealFilesOnDisk(t *testing.T) {
	for _, c := range []struct{ agent, glob string }{
		{"claude-code", "claude-settings/*.json"},
		{"codex", "codex-config/*.toml"},
	} {
		files, _ := filepath.Glob(filepath.Join(golden, c.glob))
		n := 0
		for _, f := range files {
			if strings.Contains(f, ".installed.") {
				continue
			}
			n++
			t.Run(filepath.Base(f), func(t *testing.T) {
				home := t.TempDir()
				targets, _ := Targets(c.agent, "user", env(home, "", nil))
				orig := readFile(t, f)
				path := targets[0].Path
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path, 0o640)
				ext := filepath.Ext(f)
				want := readFile(t, strings.TrimSuffix(f, ext)+".installed"+ext)
				_, backups := apply(t, targets[:1], true, time.Now())
				if got := readFile(t, path); got != want {
					t.Fatalf("installed file is not the golden one")
				}
				if m := mode(t, path); m.Perm() != 0o640 {
					t.Errorf("mode %v, want 0640", m)
				}
				if len(backups) != 1 || readFile(t, backups[0]) != orig || mode(t, backups[0]).Perm() != 0o640 || filepath.Dir(backups[0]) != filepath.Dir(path) {
					t.Fatalf("backups %v", backups)
				}
				apply(t, targets[:1], false, time.Now().Add(time.Second))
				if got := readFile(t, path); got != orig {
					t.Fatalf("after uninstall:\n%s", got)
				}
			})
		}
		if n < 6 {
			t.Fatalf("%s: only %d real files", c.glob, n)
		}
	}
}

// A settings file a dotfile manager links stays a link; the file it
// points to is replaced in its own directory, and nothing is left there
// but it.
func TestSymlinkStaysALink(t *testing.T) {
	home := t.TempDir()
	dots := filepath.Join(home, "dotfiles", "claude")
	os.MkdirAll(dots, 0o755)
	orig := readFile(t, filepath.Join(golden, "claude-settings", "ll931217.json"))
	if err := os.WriteFile(filepath.Join(dots, "settings.json"), []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	link := filepath.Join(home, ".claude", "settings.json")
	if err := os.Symlink("../dotfiles/claude/settings.json", link); err != nil {
		t.Fatal(err)
	}
	targets, _ := Targets("claude-code", "user", env(home, "", nil))
	changes, backups := apply(t, targets[:1], true, time.Now())
	if !changes[0].Link || changes[0].Real != filepath.Join(dots, "settings.json") {
		t.Fatalf("change %+v", changes[0])
	}
	if to, err := os.Readlink(link); err != nil || to != "../dotfiles/claude/settings.json" {
		t.Fatalf("the link is now %q %v", to, err)
	}
	if got := readFile(t, link); !strings.Contains(got, agentconf.HookCommand) {
		t.Fatal("the link's file was not changed")
	}
	if names, _ := os.ReadDir(dots); len(names) != 1 {
		t.Fatalf("in the dotfiles directory: %v", names)
	}
	if len(backups) != 1 || filepath.Dir(backups[0]) != filepath.Join(home, ".claude") {
		t.Fatalf("backups %v, want one beside the link", backups)
	}
	apply(t, targets[:1], false, time.Now().Add(time.Second))
	if to, _ := os.Readlink(link); to != "../dotfiles/claude/settings.json" || readFile(t, link) != orig {
		t.Fatal("uninstall through the link")
	}

	// A link to a file not yet made: the file is made where it points.
	os.Remove(link)
	os.Symlink(filepath.Join(dots, "new.json"), link)
	apply(t, targets[:1], true, time.Now())
	if mode(t, link)&fs.ModeSymlink == 0 || !strings.Contains(readFile(t, filepath.Join(dots, "new.json")), agentconf.StatuslineCommand) {
		t.Fatal("dangling link")
	}
	// Emptied by uninstall, the link's file stays (the manager's to keep).
	apply(t, targets[:1], false, time.Now())
	if got := readFile(t, filepath.Join(dots, "new.json")); got != "{}\n" {
		t.Fatalf("emptied link target: %q", got)
	}
}

// A file that does not parse is named with the line and column, and
// neither it nor any other file is touched.
func TestBrokenFileUntouched(t *testing.T) {
	home := t.TempDir()
	targets, _ := Targets("claude-code", "user", env(home, "", nil))
	broken := readFile(t, filepath.Join(golden, "broken", "automaat-trailing-comma.json"))
	os.MkdirAll(filepath.Dir(targets[0].Path), 0o700)
	os.WriteFile(targets[0].Path, []byte(broken), 0o600)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(targets[0].Path, old, old)
	for _, install := range []bool{true, false} {
		_, err := Plan(targets, install)
		var fe *FileError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), targets[0].Path+":16:13: not valid JSON (a comma before ']'") || !strings.Contains(err.Error(), "left as it is") {
			t.Fatalf("install=%v: %v", install, err)
		}
	}
	fi, _ := os.Stat(targets[0].Path)
	if readFile(t, targets[0].Path) != broken || !fi.ModTime().Equal(old) {
		t.Fatal("the broken file was touched")
	}
	if _, err := os.Stat(targets[1].Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the other file was written")
	}
}

// A file that changed after it was read is not overwritten.
func TestChangedSincePlan(t *testing.T) {
	home := t.TempDir()
	targets, _ := Targets("codex", "user", env(home, "", nil))
	os.MkdirAll(filepath.Dir(targets[0].Path), 0o700)
	os.WriteFile(targets[0].Path, []byte("model = \"a\"\n"), 0o600)
	changes, err := Plan(targets, true)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(targets[0].Path, []byte("model = \"b\"\n"), 0o600)
	if _, err := changes[0].Apply(time.Now()); err == nil || !strings.Contains(err.Error(), "changed while") {
		t.Fatalf("Apply: %v", err)
	}
	if readFile(t, targets[0].Path) != "model = \"b\"\n" {
		t.Fatal("overwritten")
	}
}

// Root writing a user's files leaves them the user's: the file, its
// backup, and a file or directory it creates.
func TestRootKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid = 40001
	home := t.TempDir()
	os.Chown(home, uid, uid)
	targets, _ := Targets("claude-code", "user", env(home, "", nil))
	os.MkdirAll(filepath.Dir(targets[0].Path), 0o700)
	os.Chown(filepath.Dir(targets[0].Path), uid, uid)
	os.WriteFile(targets[0].Path, []byte("{}\n"), 0o600)
	os.Chown(targets[0].Path, uid, uid)
	_, backups := apply(t, targets, true, time.Now())
	for _, p := range append([]string{targets[0].Path, targets[1].Path}, backups...) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if u, _ := owner(fi); u != uid {
			t.Errorf("%s owned by %d, want %d", p, u, uid)
		}
	}
	// A directory made for a project's file belongs to the project's owner.
	proj := t.TempDir()
	os.Chown(proj, uid, uid)
	targets, _ = Targets("codex", "project", env(home, proj, nil))
	apply(t, targets, true, time.Now())
	for _, p := range []string{filepath.Join(proj, ".codex"), targets[0].Path} {
		fi, _ := os.Lstat(p)
		if u, _ := owner(fi); u != uid {
			t.Errorf("%s owned by %d", p, u)
		}
	}
}
