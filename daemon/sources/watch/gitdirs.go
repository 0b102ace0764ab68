package watch

// The git metadata the watcher follows: a repository's refs/ tree (its
// commits and branch switches), for the repositories in the tree, a
// linked worktree's or submodule's git directory outside it, and the
// repository Root lies in.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/continuityd/continuityd/internal/safefile"
)

// scanGit watches the refs/ tree of a git directory (nothing else in it).
func (w *Watcher) scanGit(g *dirInfo, entries []fs.DirEntry, mode scanMode) {
	for _, e := range entries {
		if e.Name() != "refs" || !e.IsDir() {
			continue
		}
		if c := g.children["refs"]; c != nil {
			if mode.reconcile() {
				w.scan(c, mode)
			}
		} else if c := w.watch(g, "refs", joinPath(g.path, "refs"), "", kindGitRefs); c != nil {
			w.scan(c, mode)
		}
	}
	if mode == modeNew || mode == modeRescan {
		w.gitTouched(g)
	}
}

// scanRefs watches a refs/ directory's subdirectories.
func (w *Watcher) scanRefs(r *dirInfo, entries []fs.DirEntry, mode scanMode) {
	var present map[string]bool
	if mode.reconcile() {
		present = make(map[string]bool, len(entries))
	}
	files := false
	for _, e := range entries {
		name := e.Name()
		if present != nil {
			present[name] = true
		}
		if !e.IsDir() {
			files = files || !strings.HasSuffix(name, ".lock")
			continue
		}
		if c := r.children[name]; c != nil {
			if mode.reconcile() {
				w.scan(c, mode)
			}
		} else if c := w.watch(r, name, joinPath(r.path, name), "", kindGitRefs); c != nil {
			w.scan(c, mode)
		}
	}
	if files && mode == modeNew {
		w.gitTouched(r.git)
	}
	if present != nil {
		for name, c := range r.children {
			if !present[name] {
				w.drop(c)
			}
		}
	}
}

// gitFor watches the git metadata of worktree repo, whose ".git" entry is
// dotgit: a directory, or a file naming the gitdir (linked worktrees,
// submodules). parent is the worktree's state when it is in the tree. It
// returns the git directories watched apart from the tree, which the
// worktree releases when it goes (teardownExternal).
func (w *Watcher) gitFor(repo, dotgit string, isDir bool, parent *dirInfo, mode scanMode) []string {
	if isDir {
		w.gitDir(dotgit, repo, parent, mode)
		return nil
	}
	gitdir, common, err := resolveGitFile(w.o.Opener, dotgit)
	if err != nil {
		w.log.Debug("watch: unreadable .git file", "path", dotgit, "err", err)
		return nil
	}
	var ext []string
	for _, p := range []string{gitdir, common} {
		if slices.Contains(ext, p) {
			continue
		}
		if w.gitDir(p, repo, nil, mode) != nil {
			ext = append(ext, p)
		}
	}
	return ext
}

// gitDir watches a git directory (and its refs/) for repo.
func (w *Watcher) gitDir(path, repo string, parent *dirInfo, mode scanMode) *dirInfo {
	g := w.dirs[path]
	if g != nil && g.kind != kindGit {
		return nil
	}
	fresh := g == nil
	if fresh {
		if g = w.watch(parent, ".git", path, "", kindGit); g == nil {
			return nil
		}
		g.git = g
	} else if parent != nil && g.parent == nil { // watched for a linked worktree first
		g.parent = parent
		parent.child(".git", g)
	}
	if !slices.Contains(g.repos, repo) {
		g.repos = append(g.repos, repo)
	}
	if fresh || mode.reconcile() {
		w.scan(g, mode)
	}
	return g
}

// teardownExternal releases the git directories a worktree had watched
// apart from the tree.
func (w *Watcher) teardownExternal(d *dirInfo) {
	for _, p := range d.external {
		g := w.dirs[p]
		if g == nil || g.kind != kindGit {
			continue
		}
		g.repos = slices.DeleteFunc(g.repos, func(r string) bool { return r == d.path })
		if len(g.repos) == 0 && g.parent == nil {
			w.drop(g)
		}
	}
	d.external = nil
}

// resolveGitFile reads a ".git" file ("gitdir: <path>") through op and
// returns the gitdir and the common dir (they differ for a linked
// worktree). A gitdir whose commondir op may not read (a repository the
// tree's owner cannot read) is an error: it is not watched.
func resolveGitFile(op safefile.Opener, dotgit string) (gitdir, common string, err error) {
	b, err := safefile.ReadFileWith(op, dotgit, true, maxGitFile)
	if err != nil {
		return "", "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", "", errors.New("no gitdir line")
	}
	gitdir = strings.TrimSpace(rest)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(filepath.Dir(dotgit), gitdir)
	}
	gitdir = filepath.Clean(gitdir)
	if r, err := filepath.EvalSymlinks(gitdir); err == nil {
		gitdir = r
	}
	common = gitdir
	b, err = safefile.ReadFileWith(op, gitdir+"/commondir", true, maxGitFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	if err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = filepath.Clean(c)
		if r, err := filepath.EvalSymlinks(common); err == nil {
			common = r
		}
	}
	return gitdir, common, nil
}

// findOuter handles a Root inside a repository: the repository's git
// directory is watched (OnGitEvent gets the repository root) and the
// .gitignore files between the repository root and Root apply.
func (w *Watcher) findOuter() {
	if _, err := os.Lstat(w.root + "/.git"); err == nil {
		return // Root is a worktree root itself
	}
	var rules []outerRules
	for dir := filepath.Dir(w.root); ; dir = filepath.Dir(dir) {
		fi, gitErr := os.Lstat(filepath.Join(dir, ".git"))
		isRepo := gitErr == nil
		if rs := loadRules(w.o.Opener, dir, isRepo && fi.IsDir()); rs != nil {
			rel, err := filepath.Rel(dir, w.root)
			if err == nil {
				rules = append(rules, outerRules{prefix: filepath.ToSlash(rel) + "/", rules: rs})
			}
		}
		if isRepo {
			w.outer = rules
			w.gitFor(dir, filepath.Join(dir, ".git"), fi.IsDir(), nil, modeInitial)
			return
		}
		if dir == filepath.Dir(dir) {
			return
		}
	}
}

// dotGitEvent handles a ".git" entry of a work directory appearing,
// changing or going.
func (w *Watcher) dotGitEvent(d *dirInfo, name string, ev fsnotify.Event) {
	if d.rel != "" {
		w.hide(d.rel + "/") // a nested repository came or went: its directory changed whole
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		if c := d.children[".git"]; c != nil {
			w.drop(c)
		}
		w.teardownExternal(d)
		return
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return
	}
	if fi.IsDir() {
		if d.children[".git"] == nil {
			w.gitDir(name, d.path, d, modeNew)
			w.reloadRules(d) // .git/info/exclude
		}
		return
	}
	w.teardownExternal(d)
	d.external = w.gitFor(d.path, name, false, d, modeNew)
}

// gitEvent handles an event in a git directory: HEAD and packed-refs
// matter, and refs/ appearing (git init).
func (w *Watcher) gitEvent(g *dirInfo, name, base string, ev fsnotify.Event) {
	if ev.Op&^fsnotify.Chmod == 0 {
		return
	}
	switch base {
	case "HEAD", "packed-refs":
		w.gitTouched(g)
	case "refs":
		if ev.Has(fsnotify.Remove | fsnotify.Rename) {
			if c := g.children["refs"]; c != nil {
				w.drop(c)
			}
		} else if g.children["refs"] == nil {
			if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
				if c := w.watch(g, "refs", name, "", kindGitRefs); c != nil {
					w.scan(c, modeNew)
				}
			}
		}
		w.gitTouched(g)
	}
}

// refsEvent handles an event under refs/: any ref file but a lock matters.
func (w *Watcher) refsEvent(r *dirInfo, name, base string, ev fsnotify.Event) {
	if ev.Op&^fsnotify.Chmod == 0 {
		return
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		if c := r.children[base]; c != nil {
			w.drop(c)
		}
	}
	if ev.Has(fsnotify.Create) && r.children[base] == nil {
		if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
			if c := w.watch(r, base, name, "", kindGitRefs); c != nil {
				w.scan(c, modeNew)
			}
			return
		}
	}
	if strings.HasSuffix(base, ".lock") {
		return
	}
	w.gitTouched(r.git)
}
