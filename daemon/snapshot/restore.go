package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// RestoreResult says what a restore changed (or, in a dry run, would).
type RestoreResult struct {
	Snapshot string `json:"snapshot"` // the snapshot restored from
	DryRun   bool   `json:"dry_run"`
	// Safety is the snapshot of the tree as it was before the restore (a
	// new one, or the newest when the tree had not changed since):
	// restoring it undoes this restore. Empty in a dry run.
	Safety    string `json:"safety,omitempty"`
	SafetyNew bool   `json:"safety_new,omitempty"`
	// Changes are the files the restore writes or removes: "added" (comes
	// back), "modified" (content, mode or type changes), "deleted" (is
	// removed: it is not in the snapshot).
	Changes []FileChange `json:"changes"`
	// Refused are files the restore leaves alone, with the reason: a file
	// or directory that no snapshot holds is in the way, or a nested
	// repository.
	Refused []Refusal `json:"refused,omitempty"`
}

// Refusal is a file a restore left alone.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Restore brings the files of snapshot id back into the workdir: all of
// them, or only those under paths (relative to the workdir). It first
// takes a safety snapshot of the tree as it is, so every restore can be
// undone. A dry run changes nothing and lists what would change. Files no
// snapshot holds (ignored, too large) are never overwritten or removed. A
// path that is absolute, climbs out with "..", names .git, or passes
// through a symbolic link is refused (a *capsule.Error naming it) and
// nothing changes; so is one that names nothing in the snapshot or the
// tree (checkKnown). The snapshot's whole tree is checked first (checkTree),
// by a dry run too: a forged or damaged one is refused, not half restored.
func (s *Store) Restore(ctx context.Context, id string, paths []string, dryRun bool) (RestoreResult, error) {
	clean, err := s.checkPaths(paths)
	if err != nil {
		return RestoreResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return RestoreResult{}, ErrClosed
	}
	target, _, err := s.resolve(ctx, id, "id")
	if err != nil {
		return RestoreResult{}, err
	}
	// The whole tree is checked before anything changes, the same way for
	// a dry run: a forged or damaged snapshot is refused whole.
	if err := s.checkTree(ctx, target); err != nil {
		return RestoreResult{}, err
	}
	res := RestoreResult{Snapshot: target.ID, DryRun: dryRun, Changes: []FileChange{}}

	// What the previous restore wrote is in the tree as it is even when a
	// rule it wrote (".gitignore = *") ignores it: restoring the safety
	// snapshot then puts back, or removes, all of it.
	defer s.dropTakePack()
	st, err := s.stage(ctx, s.readRestored(), changeNotes{unknown: true})
	if err != nil {
		return RestoreResult{}, err
	}
	changes, err := s.diffTree(ctx, st.tree, target.tree, clean...)
	if err != nil {
		return RestoreResult{}, err
	}
	changes, res.Refused, err = s.leaveWithheld(ctx, target, clean, changes)
	if err != nil {
		return RestoreResult{}, err
	}
	if err := s.checkKnown(ctx, clean, changes, res.Refused, st.tree, target.tree, target.ID); err != nil {
		return RestoreResult{}, err
	}
	var writes, removes []change
	for _, c := range changes {
		if c.oldMode == gitlinkMode || c.newMode == gitlinkMode {
			res.Refused = append(res.Refused, Refusal{Path: c.path, Reason: "a nested repository: restore it with its own git"})
			continue
		}
		if c.status == 'D' {
			removes = append(removes, c)
		} else {
			writes = append(writes, c)
		}
	}
	removing := map[string]bool{}
	for _, c := range removes {
		removing[c.path] = true
	}
	// Check every file before changing any: nothing that no snapshot holds
	// may be overwritten, removed or replaced by a directory.
	var ok []change
	for _, c := range writes {
		if reason := s.blocked(c, removing); reason != "" {
			res.Refused = append(res.Refused, Refusal{Path: c.path, Reason: reason})
			continue
		}
		ok = append(ok, c)
	}
	writes = ok
	for _, c := range removes {
		res.Changes = append(res.Changes, FileChange{Path: c.path, Status: StatusDeleted})
	}
	for _, c := range writes {
		res.Changes = append(res.Changes, FileChange{Path: c.path, Status: statusName(c.status)})
	}
	slices.SortFunc(res.Changes, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	if err := s.countLines(ctx, st.tree, target.tree, clean, res.Changes); err != nil {
		return RestoreResult{}, err
	}
	if dryRun {
		return res, nil
	}

	safety, isNew, err := s.commit(ctx, &st, "restore", s.newest.Seq)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: the safety snapshot failed, nothing was changed: %w", err)
	}
	res.Safety, res.SafetyNew = safety.ID, isNew
	if len(res.Changes) == 0 {
		return res, nil
	}
	undo := fmt.Sprintf("; the tree as it was is snapshot %s: restore it to undo", short(safety.ID))
	// The snapshot's index is read before the first file is removed: a
	// tree git will not read fails here, with the workdir untouched.
	index := filepath.Join(s.opt.Dir, "restore.index")
	defer os.Remove(index)
	var modes map[string]fs.FileMode
	if len(writes) > 0 {
		if err := s.readIndex(ctx, index, target.tree); err != nil {
			return res, fmt.Errorf("restore: nothing was changed: %w", err)
		}
		msg, err := s.git.run(ctx, call{args: []string{"cat-file", "commit", target.commitID()}})
		if err != nil {
			return res, fmt.Errorf("restore: nothing was changed: %w", err)
		}
		modes = parseModes(string(msg))
	}
	for _, c := range removes {
		if err := s.remove(c.path); err != nil {
			return res, fmt.Errorf("restore: %w%s", err, undo)
		}
	}
	// After the removals, which may take away directories git makes again.
	owners := s.ownersBefore(writes)
	if len(writes) > 0 {
		if err := s.checkout(ctx, index, writes); err != nil {
			return res, fmt.Errorf("restore: %w%s", err, undo)
		}
		if err := s.settle(modes, owners); err != nil {
			return res, fmt.Errorf("restore: %w%s", err, undo)
		}
	}
	s.writeRestored(writes)
	s.log.Info("snapshot restored", "snapshot", short(target.ID), "files", len(res.Changes), "safety", short(safety.ID))
	return res, nil
}

// owner is who owns a file.
type owner struct{ uid, gid int }

// restoreOwners says who is to own what a restore writes: each file the
// owner of the file it replaces, each new file and directory the owner of
// the workdir. Only a daemon running as root sets owners (its files would
// be root's otherwise).
type restoreOwners struct {
	files   map[string]owner // the files written, by their path
	newDirs []string         // directories the restore makes, parents first
	workdir owner
}

// ownersBefore records, before a restore writes, who owns what it will
// replace and which directories it will make.
func (s *Store) ownersBefore(writes []change) restoreOwners {
	ro := restoreOwners{files: map[string]owner{}}
	wfi, err := os.Lstat(s.work)
	if err == nil {
		if uid, gid, ok := ownerOf(wfi); ok {
			ro.workdir = owner{uid, gid}
		}
	}
	made := map[string]bool{}
	for _, c := range writes {
		o := ro.workdir
		if fi, err := os.Lstat(filepath.Join(s.work, filepath.FromSlash(c.path))); err == nil {
			if uid, gid, ok := ownerOf(fi); ok {
				o = owner{uid, gid}
			}
		}
		ro.files[c.path] = o
		segs := strings.Split(c.path, "/")
		for i := 1; i < len(segs); i++ {
			dir := strings.Join(segs[:i], "/")
			if made[dir] {
				continue
			}
			if _, err := os.Lstat(filepath.Join(s.work, filepath.FromSlash(dir))); errors.Is(err, fs.ErrNotExist) {
				made[dir] = true
				ro.newDirs = append(ro.newDirs, dir)
			}
		}
	}
	return ro
}

// settle gives what a restore wrote the permissions recorded with the
// snapshot (modeLines: only ever fewer than git's) and, when the daemon
// runs as root, its owners (restoreOwners). Nothing is done through a
// symbolic link.
func (s *Store) settle(modes map[string]fs.FileMode, ro restoreOwners) error {
	asRoot := os.Geteuid() == 0
	fix := func(rel string, want owner, dir bool) error {
		if s.symlinkOnPath(rel, false) != "" {
			return nil
		}
		abs := filepath.Join(s.work, filepath.FromSlash(rel))
		fi, err := os.Lstat(abs)
		if err != nil {
			return err
		}
		if asRoot {
			if err := os.Lchown(abs, want.uid, want.gid); err != nil {
				return err
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 || fi.IsDir() != dir {
			return nil
		}
		if m, ok := modes[rel]; ok && m != fi.Mode().Perm() {
			return os.Chmod(abs, m&fi.Mode().Perm())
		}
		return nil
	}
	for _, d := range ro.newDirs {
		if err := fix(d, ro.workdir, true); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(ro.files)) {
		if err := fix(p, ro.files[p], false); err != nil {
			return err
		}
	}
	return nil
}

// restoredFile lists (NUL-separated) the files the last restore wrote.
const restoredFile = "restored.paths"

// readRestored returns the files the last restore wrote.
func (s *Store) readRestored() []string {
	b, err := os.ReadFile(filepath.Join(s.opt.Dir, restoredFile))
	if err != nil {
		return nil
	}
	var list []string
	for p := range strings.SplitSeq(string(b), "\x00") {
		if p != "" {
			list = append(list, p)
		}
	}
	return list
}

// writeRestored records the files a restore wrote, and has the next Take
// drop those an ignore rule covers (the safety snapshot of the next restore
// holds them anyway).
func (s *Store) writeRestored(writes []change) {
	var b bytes.Buffer
	for _, c := range writes {
		b.WriteString(c.path)
		b.WriteByte(0)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.opt.Dir, restoredFile), b.Bytes(), 0o600); err != nil {
		s.log.Warn("snapshot store: the files a restore wrote could not be recorded; undoing it may leave some that are ignored", "err", err)
	}
	s.fixIgnored = true
}

// checkPaths checks the paths a restore is limited to and returns them
// clean, relative, with "/". "." or "" alone means the whole tree.
func (s *Store) checkPaths(paths []string) ([]string, error) {
	var clean []string
	for i, p := range paths {
		field := fmt.Sprintf("paths[%d]", i)
		refuse := func(why string) error {
			return capsule.Refuse(capsule.CodeInvalidField, field, "%s; give a path relative to the workdir %s", why, s.work)
		}
		switch {
		case p == "":
			return nil, refuse("an empty path")
		case strings.Contains(p, "\x00"):
			return nil, refuse("a path with a NUL")
		case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
			return nil, refuse("an absolute path")
		}
		c := path.Clean(filepath.ToSlash(p))
		if c == ".." || strings.HasPrefix(c, "../") {
			return nil, refuse("a path outside the workdir")
		}
		if c == "." {
			return nil, nil // the whole tree
		}
		for seg := range strings.SplitSeq(c, "/") {
			if strings.EqualFold(seg, ".git") {
				return nil, refuse("a path in a .git directory, which snapshots never hold")
			}
		}
		abs := filepath.Join(s.work, filepath.FromSlash(c))
		for _, ex := range s.excludeAbs {
			if _, in := inside(ex, abs); in {
				return nil, refuse("a path in the daemon's own directory")
			}
		}
		if link := s.symlinkOnPath(c, false); link != "" {
			return nil, refuse(fmt.Sprintf("a path through the symbolic link %s (restore the link itself)", link))
		}
		clean = append(clean, c)
	}
	return clean, nil
}

// symlinkOnPath returns the first component of rel (all but the last one,
// or all of them with last) that is a symbolic link in the workdir, or "".
// A missing component ends the check: nothing below it exists.
func (s *Store) symlinkOnPath(rel string, last bool) string {
	segs := strings.Split(rel, "/")
	if !last {
		segs = segs[:len(segs)-1]
	}
	cur := s.work
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

// blocked says why a file of the snapshot cannot be written, or "".
func (s *Store) blocked(c change, removing map[string]bool) string {
	segs := strings.Split(c.path, "/")
	cur := s.work
	for i, seg := range segs {
		cur = filepath.Join(cur, seg)
		rel := strings.Join(segs[:i+1], "/")
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			return fmt.Sprintf("%s cannot be read: %v", rel, err)
		}
		lastSeg := i == len(segs)-1
		switch {
		case removing[rel]:
			return "" // a snapshotted file that the restore removes first
		case !lastSeg && fi.IsDir():
			continue
		case !lastSeg:
			return fmt.Sprintf("%s is in the way and is in no snapshot (ignored or too large); move it away first", rel)
		case fi.IsDir() && !s.emptiedBy(rel, removing):
			return "a directory is in the way; move it away first"
		case fi.IsDir():
			return "" // its files are all removed first, and it with them
		case c.status == 'A':
			// It exists but was not in the tree as it is: ignored, too
			// large, or unreadable. Overwriting it could not be undone.
			return "a file that is in no snapshot (ignored or too large) is in the way; move it away first"
		}
	}
	return ""
}

// emptiedBy reports whether every file under the directory rel is one the
// restore removes (a snapshotted file the snapshot lacks), so that the
// directory is gone before the restore writes rel.
func (s *Store) emptiedBy(rel string, removing map[string]bool) bool {
	root := filepath.Join(s.work, filepath.FromSlash(rel))
	all := true
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		r, _ := filepath.Rel(s.work, p)
		if !removing[filepath.ToSlash(r)] {
			all = false
			return fs.SkipAll
		}
		return nil
	})
	return err == nil && all
}

// remove deletes one file the snapshot does not hold, then the
// directories it leaves empty, never through a symbolic link.
func (s *Store) remove(rel string) error {
	if link := s.symlinkOnPath(rel, false); link != "" {
		return fmt.Errorf("not removing %s: it lies through the symbolic link %s", rel, link)
	}
	abs := filepath.Join(s.work, filepath.FromSlash(rel))
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for dir := filepath.Dir(abs); dir != s.work; dir = filepath.Dir(dir) {
		if _, in := inside(s.work, dir); !in || os.Remove(dir) != nil {
			break // not empty, or not ours
		}
	}
	return nil
}

// readIndex reads a tree into the temporary index a restore checks out
// from.
func (s *Store) readIndex(ctx context.Context, index, tree string) error {
	_, err := s.git.run(ctx, call{args: []string{"read-tree", tree}, env: []string{"GIT_INDEX_FILE=" + index}})
	return err
}

// checkout writes files of the temporary index (readIndex) into the
// workdir with git checkout-index: git writes symbolic links as links,
// sets modes, and never writes through a symbolic link on the way.
func (s *Store) checkout(ctx context.Context, index string, files []change) error {
	var list bytes.Buffer
	for _, c := range files {
		list.WriteString(c.path)
		list.WriteByte(0)
	}
	_, err := s.git.run(ctx, call{args: []string{"checkout-index", "-f", "-q", "-z", "--stdin"}, stdin: &list, env: []string{"GIT_INDEX_FILE=" + index}, inWork: true})
	return err
}
