package take

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// walker walks the workdir for a Take.
type walker struct {
	work         string
	ignoreDirs   []string      // sorted: names left out at any depth
	excludeAbs   []string      // absolute paths left out (the store, the state directory)
	maxFileBytes int64         // files over it are named, not stored; negative: no limit
	files        *atomic.Int64 // the files found so far (Progress)
}

// The size walk of the workdir: what git add -A would leave out without
// a word, what it must be told to leave out (files over the size limit,
// nested repositories), and the permissions git does not keep.

// walked is what the walk of the workdir found.
type walked struct {
	bytes int64                  // the sizes of the regular files under the limit
	over  map[string]int64       // files over the size limit; nested repositories as repoSize
	modes map[string]fs.FileMode // files and directories a restore would otherwise give more permissions
	odd   []repo.Skipped         // what git would leave out without a word
	files []seenFile             // the files and links found, when asked (walkChanged)
}

// merge adds one directory's findings.
func (w *walked) merge(o walked) {
	w.bytes += o.bytes
	maps.Copy(w.over, o.over)
	maps.Copy(w.modes, o.modes)
	w.odd = append(w.odd, o.odd...)
	w.files = append(w.files, o.files...)
}

// walk finds the regular files over the size limit, the nested
// repositories (as repoSize), the files and directories whose permissions
// git does not keep (keptMode), and what git would leave out silently
// (names it takes for .git, paths too long, directories it cannot read),
// without following symbolic links and without entering .git, the ignored
// directory names and the excluded paths (the store, the state
// directory). A few goroutines share the directories: the walk is one
// lstat per file, and lstat calls overlap well.
func (w *walker) walk() (walked, error) {
	res := walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
	root, err := os.Open(w.work)
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", w.work, err)
	}
	ents, err := root.ReadDir(-1)
	root.Close()
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", w.work, err)
	}
	queue, top := w.classify("", ents, false)
	res.merge(top)
	return res, w.walkDirs(queue, &res, false)
}

// classify looks at the entries ents of directory dir ("" for the
// workdir) for the walk: the subdirectories to walk and what the files
// tell; with collect, the files and links themselves too.
func (w *walker) classify(dir string, ents []fs.DirEntry, collect bool) (subdirs []string, found walked) {
	{
		found = walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
		files := 0
		defer func() { w.files.Add(int64(files)) }()
		for _, e := range ents {
			name := e.Name()
			if name == ".git" {
				continue
			}
			child := name
			if dir != "" {
				child = dir + "/" + name
			}
			if repo.IsDotGit(name) {
				found.odd = append(found.odd, repo.Skipped{Path: child, Reason: repo.ReasonGitName})
				continue
			}
			if len(w.work)+1+len(child) > repo.MaxPathBytes {
				found.odd = append(found.odd, repo.Skipped{Path: child, Reason: repo.ReasonPathTooLong})
				continue
			}
			switch t := e.Type(); {
			case t.IsDir():
				if _, skip := slices.BinarySearch(w.ignoreDirs, name); skip {
					continue
				}
				if len(w.excludeAbs) > 0 && slices.Contains(w.excludeAbs, filepath.Join(w.work, filepath.FromSlash(child))) {
					continue
				}
				if fi, err := e.Info(); err == nil && !keptMode(fi.Mode()) {
					found.modes[child] = fi.Mode().Perm()
				}
				subdirs = append(subdirs, child)
			case t.IsRegular():
				files++
				fi, err := e.Info()
				if err != nil {
					continue // gone: git will not see it either
				}
				if w.maxFileBytes >= 0 && fi.Size() > w.maxFileBytes {
					found.over[child] = fi.Size()
					continue
				}
				found.bytes += fi.Size()
				if !keptMode(fi.Mode()) {
					found.modes[child] = fi.Mode().Perm()
				}
				if collect {
					found.files = append(found.files, seenFile{path: child, mode: fi.Mode()})
				}
			case t&fs.ModeSymlink != 0:
				files++ // stored as a link
				if collect {
					found.files = append(found.files, seenFile{path: child, mode: fs.ModeSymlink})
				}
			}
		}
		return subdirs, found
	}
}

// walkDirs walks the directories of queue (and below) with a few
// goroutines, merging what it finds into res (with collect, the files).
// With nothing queued (a burst of changed files) it starts none: each
// would wake a thread for nothing.
func (w *walker) walkDirs(queue []string, res *walked, collect bool) error {
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		pending = len(queue) // directories queued or being read
	)
	worker := func() {
		mu.Lock()
		defer mu.Unlock()
		for {
			for len(queue) == 0 && pending > 0 {
				cond.Wait()
			}
			if pending == 0 {
				return
			}
			dir := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			mu.Unlock()
			var subdirs []string
			var found walked
			f, err := os.Open(filepath.Join(w.work, filepath.FromSlash(dir)))
			var ents []fs.DirEntry
			if err == nil {
				ents, err = f.ReadDir(-1)
				f.Close()
			}
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// gone since it was listed: git will not see it either
			case err != nil:
				// git would warn and go on: named, with the reason.
				found.odd = []repo.Skipped{{Path: dir + "/", Reason: repo.ReasonUnreadable}}
			case slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == ".git" }):
				// A nested repository, submodule or linked worktree:
				// left out whole, or git add would run git status
				// in it, under its own configuration.
				found.over = map[string]int64{dir: repoSize}
			default:
				subdirs, found = w.classify(dir, ents, collect)
			}
			mu.Lock()
			res.merge(found)
			queue = append(queue, subdirs...)
			pending += len(subdirs) - 1
			cond.Broadcast()
		}
	}
	var wg sync.WaitGroup
	if len(queue) > 0 { // a directory found may hold more: all of them
		for range walkers {
			wg.Go(worker)
		}
	}
	wg.Wait()
	// The walkers finish in any order: what the snapshot names does not.
	slices.SortFunc(res.odd, func(a, b repo.Skipped) int { return strings.Compare(a.Path, b.Path) })
	return nil
}

// keptMode reports whether git keeps a file's or directory's permissions
// closely enough: a restore writes 0644 or 0755 (for a directory, or a
// file its owner may run), so permissions with a bit of those missing
// (0600, 0640, 0700, …) are recorded with the snapshot and put back.
func keptMode(m fs.FileMode) bool {
	git := fs.FileMode(0o644)
	if m.IsDir() || m&0o100 != 0 {
		git = 0o755
	}
	return m.Perm()&git == git
}

// repoSize marks a nested repository in the walk's results.
const repoSize = -1

// walkers is how many goroutines share the size walk.
const walkers = 4

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// changedRoots turns the notes into the paths to look at again: clean,
// relative, none below another, a nested repository's directory for a
// path inside it. ok is false when the whole tree must be added again: an
// ignore file changed, a path is not a plain relative path, or there are
// too many. The caller knows the whole tree's state from an earlier walk.
func (w *walker) changedRoots(n changeNotes) (roots []string, ok bool) {
	if n.unknown || len(n.paths) > maxChangedPaths {
		return nil, false
	}
	set := map[string]bool{}
	for p := range n.paths {
		p = strings.TrimSuffix(p, "/")
		if p == "" || p != path.Clean(p) || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return nil, false
		}
		if path.Base(p) == ".gitignore" {
			return nil, false // what the rules cover changed: git decides anew for the whole tree
		}
		p, skip := w.rootOf(p)
		if !skip {
			set[p] = true
		}
	}
	roots = slices.Sorted(maps.Keys(set))
	// Drop the paths below another (sorted: a parent comes right before
	// its children's run).
	out := roots[:0]
	for _, p := range roots {
		if len(out) > 0 && repo.Under(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out, true
}

// rootOf is the path to look at again for changed path p: p, or the
// nearest directory above it that is a nested repository (left out
// whole). skip is set when git never looks below p's directories (.git,
// an ignored directory name, an excluded path).
func (w *walker) rootOf(p string) (string, bool) {
	parts := strings.Split(p, "/")
	for i := range parts {
		name := parts[i]
		if name == ".git" || repo.IsDotGit(name) && i < len(parts)-1 {
			return "", true
		}
		if i == len(parts)-1 {
			break
		}
		if _, ig := slices.BinarySearch(w.ignoreDirs, name); ig {
			return "", true
		}
		dir := strings.Join(parts[:i+1], "/")
		abs := filepath.Join(w.work, filepath.FromSlash(dir))
		if slices.Contains(w.excludeAbs, abs) {
			return "", true
		}
		if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
			return dir, false
		}
	}
	return p, false
}

// inRoots reports whether p is one of roots (a set) or lies below one.
func inRoots(p string, roots map[string]bool) bool {
	p = strings.TrimSuffix(p, "/")
	for {
		if roots[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// treeState is what the last Take's walk found in the whole tree, kept so
// that a Take from what changed walks the changed paths only and still
// names everything a full walk would.
type treeState struct {
	modes      map[string]fs.FileMode
	odd        []repo.Skipped
	unreadable []repo.Skipped
}

// walkChanged walks the roots only (a file, or a directory whole) and
// merges what it finds into the whole tree's state from the last Take:
// the files over the size (over), those the rules ignore anyway
// (ignored), and the rest of state.
func (w *walker) walkChanged(roots []string, over, ignored map[string]int64, state *treeState) (walked, error) {
	res := walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
	var dirs []string
	for _, r := range roots {
		fi, err := os.Lstat(filepath.Join(w.work, filepath.FromSlash(r)))
		if err != nil {
			continue // gone (or its directory replaced by a file): git finds its entries gone
		}
		parent := path.Dir(r)
		if parent == "." {
			parent = ""
		}
		sub, found := w.classify(parent, []fs.DirEntry{fs.FileInfoToDirEntry(fi)}, true)
		res.merge(found)
		dirs = append(dirs, sub...)
	}
	if err := w.walkDirs(dirs, &res, true); err != nil {
		return res, err
	}
	set := make(map[string]bool, len(roots))
	for _, r := range roots {
		set[r] = true
	}
	// The rest of the tree is as the last Take found it.
	for p, n := range over {
		if !inRoots(p, set) {
			res.over[p] = n
		}
	}
	for p, n := range ignored {
		if !inRoots(p, set) {
			res.over[p] = n
		}
	}
	for p, m := range state.modes {
		if !inRoots(p, set) {
			res.modes[p] = m
		}
	}
	for _, k := range state.odd {
		if !inRoots(k.Path, set) {
			res.odd = append(res.odd, k)
		}
	}
	return res, nil
}

// symlinkOnPath returns the first component of rel (all but the last one,
// or all of them with last) that is a symbolic link in the workdir, or "".
// A missing component ends the check: nothing below it exists.
func (w *walker) symlinkOnPath(rel string, last bool) string {
	segs := strings.Split(rel, "/")
	if !last {
		segs = segs[:len(segs)-1]
	}
	cur := w.work
	for i, seg := range segs {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return strings.Join(segs[:i+1], "/")
		}
	}
	return ""
}
