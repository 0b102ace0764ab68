package snapshot

import (
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// A snapshot from what changed.
//
// A Take re-adds the whole tree (the size walk and `git add -A`: an lstat
// of every file, twice) unless it is told what changed since the
// previous Take: the workdir watcher tells (NoteChanged), or says it
// cannot vouch (NoteUnknown). Then only the changed paths are looked at
// again: the size walk of those paths (a changed directory whole), `git
// ls-files` of them (what the private index holds there and the files
// there the ignore rules leave in) and `git add -A` of exactly those
// files. The rest of the private index is the previous Take's, which the
// watcher vouches for. A change git would see in any other way (an
// ignore file changed, too many paths) takes the full add.

// maxChangedPaths bounds the paths a Take looks at again one by one;
// past it the whole tree is added again (cheaper than a long pathspec).
const maxChangedPaths = 4096

// changeNotes are the paths changed since the previous Take, as the
// watcher reported them; unknown when it could not vouch for the tree,
// when no watcher follows it, and at the first Take after Open.
type changeNotes struct {
	paths   map[string]bool
	unknown bool
}

// Follow tells the store that a watcher now reports every change of the
// workdir (NoteChanged, NoteUnknown): the next Take adds the whole tree
// (what changed before the watcher started is not known), the Takes
// after it look at the changed paths only. Call it once the watcher's
// watches are in place; Unfollow when it stops. Without Follow, every
// Take adds the whole tree.
func (s *Store) Follow() {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	s.followed = true
	s.notes = changeNotes{unknown: true}
}

// Unfollow tells the store that no watcher reports the changes any more:
// every Take adds the whole tree again.
func (s *Store) Unfollow() {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	s.followed = false
	s.notes = changeNotes{unknown: true}
}

// NoteChanged tells the store that paths (relative to the workdir, with
// "/"; a directory may end in "/") changed: the next Take looks at them
// again. Safe from any goroutine, also while a Take runs (the paths are
// then for the Take after it).
func (s *Store) NoteChanged(paths []string) {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	if s.notes.unknown {
		return
	}
	if s.notes.paths == nil {
		s.notes.paths = map[string]bool{}
	}
	for _, p := range paths {
		if len(s.notes.paths) > maxChangedPaths {
			s.notes = changeNotes{unknown: true}
			return
		}
		s.notes.paths[p] = true
	}
}

// NoteUnknown tells the store that changes may have been missed (the
// watcher lost events, could not watch a directory, or has just started):
// the next Take adds the whole tree again.
func (s *Store) NoteUnknown() {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	s.notes = changeNotes{unknown: true}
}

// takeNotes hands the notes gathered so far to a Take and starts new
// ones; a Take that fails gives them back (keepNotes).
func (s *Store) takeNotes() changeNotes {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	n := s.notes
	s.notes = changeNotes{unknown: !s.followed}
	return n
}

// keepNotes gives the notes of a failed Take back for the next one.
func (s *Store) keepNotes(n changeNotes) {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	if n.unknown || s.notes.unknown {
		s.notes = changeNotes{unknown: true}
		return
	}
	if s.notes.paths == nil {
		s.notes.paths = map[string]bool{}
	}
	maps.Copy(s.notes.paths, n.paths)
}

// changedRoots turns the notes into the paths to look at again: clean,
// relative, none below another, a nested repository's directory for a
// path inside it. ok is false when the whole tree must be added again: an
// ignore file changed, a path is not a plain relative path, or there are
// too many.
func (s *Store) changedRoots(n changeNotes) (roots []string, ok bool) {
	if n.unknown || len(n.paths) > maxChangedPaths || s.walkState == nil {
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
		p, skip := s.rootOf(p)
		if !skip {
			set[p] = true
		}
	}
	roots = slices.Sorted(maps.Keys(set))
	// Drop the paths below another (sorted: a parent comes right before
	// its children's run).
	out := roots[:0]
	for _, p := range roots {
		if len(out) > 0 && under(p, out[len(out)-1]) {
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
func (s *Store) rootOf(p string) (string, bool) {
	parts := strings.Split(p, "/")
	for i := range parts {
		name := parts[i]
		if name == ".git" || repo.IsDotGit(name) && i < len(parts)-1 {
			return "", true
		}
		if i == len(parts)-1 {
			break
		}
		if _, ig := slices.BinarySearch(s.ignoreDirs, name); ig {
			return "", true
		}
		dir := strings.Join(parts[:i+1], "/")
		abs := filepath.Join(s.work, filepath.FromSlash(dir))
		if slices.Contains(s.excludeAbs, abs) {
			return "", true
		}
		if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
			return dir, false
		}
	}
	return p, false
}

// under reports whether p is root or lies below it.
func under(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
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
// merges what it finds into the whole tree's state from the last Take.
func (s *Store) walkChanged(roots []string) (walked, error) {
	res := walked{over: map[string]int64{}, modes: map[string]fs.FileMode{}}
	var dirs []string
	for _, r := range roots {
		fi, err := os.Lstat(filepath.Join(s.work, filepath.FromSlash(r)))
		if err != nil {
			continue // gone (or its directory replaced by a file): git finds its entries gone
		}
		parent := path.Dir(r)
		if parent == "." {
			parent = ""
		}
		sub, w := s.classify(parent, []fs.DirEntry{fs.FileInfoToDirEntry(fi)}, true)
		res.merge(w)
		dirs = append(dirs, sub...)
	}
	if err := s.walkDirs(dirs, &res, true); err != nil {
		return res, err
	}
	set := make(map[string]bool, len(roots))
	for _, r := range roots {
		set[r] = true
	}
	// The rest of the tree is as the last Take found it.
	for p, n := range s.oversized {
		if !inRoots(p, set) {
			res.over[p] = n
		}
	}
	for p, n := range s.bigIgnored {
		if !inRoots(p, set) {
			res.over[p] = n
		}
	}
	for p, m := range s.walkState.modes {
		if !inRoots(p, set) {
			res.modes[p] = m
		}
	}
	for _, k := range s.walkState.odd {
		if !inRoots(k.Path, set) {
			res.odd = append(res.odd, k)
		}
	}
	return res, nil
}
