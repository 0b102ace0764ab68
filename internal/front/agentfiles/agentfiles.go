// Package agentfiles finds an agent's config files (Claude Code's settings
// and MCP servers, Codex's config.toml, for a user or a project) and
// changes them the way a person's files deserve: the new bytes come from
// internal/front/agentconf, a copy of the old ones is kept beside the file, the
// file is replaced atomically with its mode and owner, and a file that is
// a symbolic link (a dotfile manager's) stays a link: what it points to is
// replaced, in its own directory.
package agentfiles

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/front/agentconf"
	"github.com/continuityd/continuityd/internal/front/udiff"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Kind is what a file holds, and so how continuityd merges into it.
type Kind int

// The kinds of files.
const (
	ClaudeSettings Kind = iota + 1 // Claude Code's settings.json: hooks, status line
	MCPJSON                        // a JSON file with mcpServers: ~/.claude.json, .mcp.json
	CodexConfig                    // Codex's config.toml: hooks, MCP servers, features
)

// The agents and scopes the command line names.
var (
	Agents = []string{"claude-code", "codex", "mcp"}
	Scopes = []string{"user", "project"}
)

// Target is one file to merge into.
type Target struct {
	Path string
	Kind Kind
	// NewMode is the mode of the file and DirMode that of its directory
	// when continuityd creates them: a user's files are theirs alone, a
	// project's are meant to be committed.
	NewMode, DirMode fs.FileMode
}

// Env is where the files are looked for.
type Env struct {
	Home   string              // the user's home directory
	Dir    string              // the project: the current directory
	Getenv func(string) string // CLAUDE_CONFIG_DIR, CODEX_HOME
}

// Targets returns the files agent's scope keeps its settings in: for
// Claude Code its settings and the file it reads MCP servers from, for
// Codex its config.toml, for mcp the MCP servers file alone.
func Targets(agent, scope string, env Env) ([]Target, error) {
	user := scope == "user"
	if !user && scope != "project" {
		return nil, fmt.Errorf("unknown scope %q: want user or project", scope)
	}
	file, dir := fs.FileMode(0o644), fs.FileMode(0o755)
	if user {
		file, dir = 0o600, 0o700
	}
	t := func(path string, k Kind) Target { return Target{path, k, file, dir} }
	claudeDir, claudeJSON := filepath.Join(env.Home, ".claude"), filepath.Join(env.Home, ".claude.json")
	if v := env.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
		claudeDir, claudeJSON = v, filepath.Join(v, ".claude.json")
	}
	codexHome := filepath.Join(env.Home, ".codex")
	if v := env.Getenv("CODEX_HOME"); v != "" {
		codexHome = v
	}
	switch {
	case agent == "claude-code" && user:
		return []Target{t(filepath.Join(claudeDir, "settings.json"), ClaudeSettings), t(claudeJSON, MCPJSON)}, nil
	case agent == "claude-code":
		return []Target{t(filepath.Join(env.Dir, ".claude", "settings.json"), ClaudeSettings), t(filepath.Join(env.Dir, ".mcp.json"), MCPJSON)}, nil
	case agent == "codex" && user:
		return []Target{t(filepath.Join(codexHome, "config.toml"), CodexConfig)}, nil
	case agent == "codex":
		return []Target{t(filepath.Join(env.Dir, ".codex", "config.toml"), CodexConfig)}, nil
	case agent == "mcp" && user:
		return []Target{t(claudeJSON, MCPJSON)}, nil
	case agent == "mcp":
		return []Target{t(filepath.Join(env.Dir, ".mcp.json"), MCPJSON)}, nil
	}
	return nil, fmt.Errorf("unknown agent %q: want %s", agent, strings.Join(Agents, ", "))
}

// FileError is a file continuityd will not change, and why.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	var se *agentconf.SyntaxError
	var sh *agentconf.ShapeError
	switch {
	case errors.As(e.Err, &se):
		return fmt.Sprintf("%s:%d:%d: not valid %s (%s); the file is left as it is", e.Path, se.Line, se.Col, format(e.Path), se.Msg)
	case errors.As(e.Err, &sh):
		return fmt.Sprintf("%s:%d:%d: %s; the file is left as it is", e.Path, sh.Line, sh.Col, sh.Msg)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

func format(path string) string {
	if strings.HasSuffix(path, ".toml") {
		return "TOML"
	}
	return "JSON"
}

// maxSize bounds what is read of a file: ~/.claude.json grows with a
// user's projects, but not to this.
const maxSize = 64 << 20

// Change is what installing or uninstalling does to one file.
type Change struct {
	Target
	Real    string // the file itself: Path, or where Path's links lead
	Link    bool   // Path is a symbolic link
	Existed bool
	Before  []byte
	After   []byte
	Remove  bool // the file is left holding nothing: it goes
	Result  agentconf.Result

	mode     fs.FileMode
	uid, gid int // the file's owner, kept when root rewrites it; -1 unknown
}

// Changed reports whether the change writes anything.
func (c Change) Changed() bool {
	return c.Remove || !bytes.Equal(c.Before, c.After)
}

// Diff returns the change as a unified diff, with the file named as shown.
func (c Change) Diff(shown string) string {
	before, after := shown, shown
	if !c.Existed {
		before = "/dev/null"
	}
	if c.Remove {
		after = "/dev/null"
		return udiff.Unified(before, after, c.Before, nil)
	}
	return udiff.Unified(before, after, c.Before, c.After)
}

// Plan reads each target and works out its change, writing nothing. A file
// that does not parse, or holds what continuityd cannot merge into, is a
// *FileError and nothing is planned: all files change or none.
func Plan(targets []Target, install bool) ([]Change, error) {
	var changes []Change
	for _, t := range targets {
		c, err := plan(t, install)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	return changes, nil
}

func plan(t Target, install bool) (Change, error) {
	c := Change{Target: t, uid: -1, gid: -1, mode: t.NewMode}
	var err error
	if c.Real, c.Link, err = resolve(t.Path); err != nil {
		return c, &FileError{t.Path, err}
	}
	if c.Before, err = read(&c); err != nil {
		return c, &FileError{t.Path, err}
	}
	f := map[bool]map[Kind]func([]byte) (agentconf.Result, error){
		true:  {ClaudeSettings: agentconf.InstallClaudeSettings, MCPJSON: agentconf.InstallMCP, CodexConfig: agentconf.InstallCodex},
		false: {ClaudeSettings: agentconf.UninstallClaudeSettings, MCPJSON: agentconf.UninstallMCP, CodexConfig: agentconf.UninstallCodex},
	}[install][t.Kind]
	if c.Result, err = f(c.Before); err != nil {
		return c, &FileError{t.Path, err}
	}
	c.After = c.Result.Out
	if !c.Existed && !install {
		c.After = nil
	}
	// A file left with nothing in it goes, unless it is a link's target:
	// that file is the dotfile manager's to keep.
	c.Remove = !install && c.Existed && c.Result.Empty && !c.Link
	return c, nil
}

// resolve follows path's symbolic links to the file they lead to, which
// may not exist yet.
func resolve(path string) (real string, link bool, err error) {
	p := path
	for range 40 {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, link, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, link, nil
		}
		to, err := os.Readlink(p)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(p), to)
		}
		p, link = to, true
	}
	return "", false, errors.New("too many symbolic links")
}

// read reads the file c.Real, if it exists, noting its mode and owner.
func read(c *Change) ([]byte, error) {
	f, fi, err := safefile.OpenFollow(c.Real)
	if errors.Is(err, fs.ErrNotExist) {
		// A new file: it will be owned as the nearest directory above it is.
		for d := filepath.Dir(c.Real); ; d = filepath.Dir(d) {
			if di, derr := os.Stat(d); derr == nil {
				c.uid, c.gid = owner(di)
				break
			}
			if d == filepath.Dir(d) {
				break
			}
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := safefile.ReadAll(f, fi, c.Real, maxSize)
	if err != nil {
		return nil, err
	}
	c.Existed, c.mode = true, fi.Mode().Perm()
	c.uid, c.gid = owner(fi)
	return b, nil
}

// Apply makes the change: a backup of the file as it was beside Path
// (when it existed, changes and stays), then the new bytes written atomically in
// the file's own directory, with its mode and owner. It returns the
// backup's path. A file that changed since Plan read it is left alone.
func (c Change) Apply(now time.Time) (backup string, err error) {
	if !c.Changed() {
		return "", nil
	}
	var current Change
	current.Real = c.Real
	if b, err := read(&current); err != nil {
		return "", err
	} else if current.Existed != c.Existed || !bytes.Equal(b, c.Before) {
		return "", fmt.Errorf("%s changed while continuityd was reading it: nothing written; run the command again", c.Path)
	}
	// A file about to go held nothing but continuityd's: no backup of it.
	if c.Existed && !c.Remove {
		if backup, err = writeBackup(c.Path, c.Before, c.mode, now); err != nil {
			return "", fmt.Errorf("backing up %s: %w", c.Path, err)
		}
		if err := c.keepOwner(backup); err != nil {
			return backup, err
		}
	}
	dir := filepath.Dir(c.Real)
	if c.Remove {
		if err := os.Remove(c.Real); err != nil {
			return backup, err
		}
		return backup, atomicfile.SyncDir(dir)
	}
	if !c.Existed {
		var made []string // the directories MkdirAll is about to create
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
				break
			}
			made = append(made, d)
		}
		if err := os.MkdirAll(dir, c.DirMode); err != nil {
			return "", err
		}
		for _, d := range made {
			if err := c.keepOwner(d); err != nil {
				return "", err
			}
		}
	}
	if err := atomicfile.WriteFile(c.Real, c.After, c.mode); err != nil {
		return backup, err
	}
	return backup, c.keepOwner(c.Real)
}

// keepOwner gives a file root wrote (sudo with a user's HOME, a
// provisioning script) to the owner of the file it replaces, or of the
// directory a new one is in: the user can still edit their own settings.
func (c Change) keepOwner(path string) error {
	if os.Geteuid() != 0 || c.uid < 0 || c.uid == 0 {
		return nil
	}
	return os.Lchown(path, c.uid, c.gid)
}

// writeBackup copies data to a new file beside path, named after it and
// the time: path.continuityd-backup-20261206T101500Z (-2, -3… when that
// name is taken).
func writeBackup(path string, data []byte, mode fs.FileMode, now time.Time) (string, error) {
	base := path + ".continuityd-backup-" + now.UTC().Format("20060102T150405Z")
	for i := 1; i < 100; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		return name, atomicfile.SyncDir(filepath.Dir(name))
	}
	return "", errors.New("no free name for a backup")
}
