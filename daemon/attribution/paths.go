package attribution

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/termsafe"
	"github.com/continuityd/continuityd/internal/toolpaths"
)

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
	if err := toolpaths.CheckPath(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		if cwd == "" || !filepath.IsAbs(cwd) || toolpaths.CheckPath(cwd) != nil {
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
	if err := toolpaths.CheckPath(p); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) ||
		p == "." || p == ".." || strings.HasPrefix(p, "../") || filepath.ToSlash(filepath.Clean(p)) != p {
		return fmt.Errorf("%s is not a clean path relative to the workdir", termsafe.Name(p))
	}
	return nil
}
