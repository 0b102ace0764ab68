package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

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
func (s *Store) walk() (walked, error) {
	res := walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
	root, err := os.Open(s.work)
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	ents, err := root.ReadDir(-1)
	root.Close()
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	queue, top := s.classify("", ents, false)
	res.merge(top)
	return res, s.walkDirs(queue, &res, false)
}

// classify looks at the entries ents of directory dir ("" for the
// workdir) for the walk: the subdirectories to walk and what the files
// tell; with collect, the files and links themselves too.
func (s *Store) classify(dir string, ents []fs.DirEntry, collect bool) (subdirs []string, w walked) {
	{
		w = walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
		files := 0
		defer func() { s.stepFiles.Add(int64(files)) }()
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
				w.odd = append(w.odd, repo.Skipped{Path: child, Reason: repo.ReasonGitName})
				continue
			}
			if len(s.work)+1+len(child) > repo.MaxPathBytes {
				w.odd = append(w.odd, repo.Skipped{Path: child, Reason: repo.ReasonPathTooLong})
				continue
			}
			switch t := e.Type(); {
			case t.IsDir():
				if _, skip := slices.BinarySearch(s.ignoreDirs, name); skip {
					continue
				}
				if len(s.excludeAbs) > 0 && slices.Contains(s.excludeAbs, filepath.Join(s.work, filepath.FromSlash(child))) {
					continue
				}
				if fi, err := e.Info(); err == nil && !keptMode(fi.Mode()) {
					w.modes[child] = fi.Mode().Perm()
				}
				subdirs = append(subdirs, child)
			case t.IsRegular():
				files++
				fi, err := e.Info()
				if err != nil {
					continue // gone: git will not see it either
				}
				if s.opt.MaxFileBytes >= 0 && fi.Size() > s.opt.MaxFileBytes {
					w.over[child] = fi.Size()
					continue
				}
				w.bytes += fi.Size()
				if !keptMode(fi.Mode()) {
					w.modes[child] = fi.Mode().Perm()
				}
				if collect {
					w.files = append(w.files, seenFile{path: child, mode: fi.Mode()})
				}
			case t&fs.ModeSymlink != 0:
				files++ // stored as a link
				if collect {
					w.files = append(w.files, seenFile{path: child, mode: fs.ModeSymlink})
				}
			}
		}
		return subdirs, w
	}
}

// walkDirs walks the directories of queue (and below) with a few
// goroutines, merging what it finds into res (with collect, the files).
// With nothing queued (a burst of changed files) it starts none: each
// would wake a thread for nothing.
func (s *Store) walkDirs(queue []string, res *walked, collect bool) error {
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
			var w walked
			f, err := os.Open(filepath.Join(s.work, filepath.FromSlash(dir)))
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
				w.odd = []repo.Skipped{{Path: dir + "/", Reason: repo.ReasonUnreadable}}
			case slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == ".git" }):
				// A nested repository, submodule or linked worktree:
				// left out whole, or git add would run git status
				// in it, under its own configuration.
				w.over = map[string]int64{dir: repoSize}
			default:
				subdirs, w = s.classify(dir, ents, collect)
			}
			mu.Lock()
			res.merge(w)
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
