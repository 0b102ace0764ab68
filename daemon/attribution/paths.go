package attribution

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// Bounds on what a tool call may claim. A path comes from an agent's hook
// payload, its transcript or a patch it wrote: untrusted text, checked
// before it is kept.
const (
	// MaxPath bounds one path, in bytes (PATH_MAX on Linux).
	MaxPath = 4096
	// MaxPathsPerCall bounds the paths one tool call claims; a patch that
	// names more is cut there, and the cut is reported.
	MaxPathsPerCall = 1000
)

// CheckPath refuses a path that cannot be a file name an agent's tool
// wrote: empty, too long, not UTF-8, or holding a control character (a NUL,
// a line break, an escape sequence). The error names the problem and shows
// the path escaped.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case len(p) > MaxPath:
		return fmt.Errorf("a path of %d bytes (at most %d)", len(p), MaxPath)
	case !utf8.ValidString(p):
		return fmt.Errorf("a path that is not UTF-8: %s", termsafe.Name(p))
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("a path with a control character: %s", termsafe.Name(p))
		}
	}
	return nil
}

// Resolver turns the paths tool calls name (absolute, or relative to the
// agent's cwd) into paths relative to the workdir, the form every change
// the ledger keeps has, and refuses those outside it.
type Resolver struct {
	// dirs are the workdir as given and, when it differs, with symbolic
	// links resolved: an agent may name a file either way.
	dirs []string
}

// NewResolver makes a Resolver for workdir, an absolute path. It resolves
// the workdir's symbolic links once, here; Rel then reads no disk.
func NewResolver(workdir string) (*Resolver, error) {
	if !filepath.IsAbs(workdir) {
		return nil, fmt.Errorf("attribution: the workdir %s is not an absolute path", termsafe.Name(workdir))
	}
	dir := filepath.Clean(workdir)
	r := &Resolver{dirs: []string{dir}}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		r.dirs = append(r.dirs, real)
	}
	return r, nil
}

// Rel returns p relative to the workdir, cleaned, with "/" separators. A
// relative p is taken relative to cwd (the agent's working directory, as
// its payload says). It refuses, naming the problem, a path CheckPath
// refuses, a relative path without an absolute cwd, the workdir itself, a
// path outside the workdir, and one inside a .git directory (the agent's
// repository is not its work).
func (r *Resolver) Rel(cwd, p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		if cwd == "" || !filepath.IsAbs(cwd) || CheckPath(cwd) != nil {
			return "", fmt.Errorf("a relative path %s with no absolute working directory to read it from", termsafe.Name(p))
		}
		p = filepath.Join(cwd, p)
	}
	p = filepath.Clean(p)
	for _, dir := range r.dirs {
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if rel == "." {
			return "", fmt.Errorf("the workdir itself (%s), not a file in it", termsafe.Name(p))
		}
		rel = filepath.ToSlash(rel)
		for seg := range strings.SplitSeq(rel, "/") {
			if strings.EqualFold(seg, ".git") {
				return "", fmt.Errorf("a path in a .git directory: %s", termsafe.Name(rel))
			}
		}
		return rel, nil
	}
	return "", fmt.Errorf("a path outside the workdir: %s", termsafe.Name(p))
}

// validRel reports whether p has the shape Rel returns: relative, clean,
// "/"-separated, not climbing out.
func validRel(p string) error {
	if err := CheckPath(p); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) ||
		p == "." || p == ".." || strings.HasPrefix(p, "../") || filepath.ToSlash(filepath.Clean(p)) != p {
		return fmt.Errorf("%s is not a clean path relative to the workdir", termsafe.Name(p))
	}
	return nil
}
