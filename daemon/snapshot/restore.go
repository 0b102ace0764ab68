package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
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
// nothing changes.
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
	res := RestoreResult{Snapshot: target.ID, DryRun: dryRun, Changes: []FileChange{}}

	st, err := s.stage(ctx)
	if err != nil {
		return RestoreResult{}, err
	}
	changes, err := s.diffTree(ctx, st.tree, target.tree, clean...)
	if err != nil {
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
	for _, c := range removes {
		if err := s.remove(c.path); err != nil {
			return res, fmt.Errorf("restore: %w%s", err, undo)
		}
	}
	if len(writes) > 0 {
		if err := s.checkout(ctx, target.tree, writes); err != nil {
			return res, fmt.Errorf("restore: %w%s", err, undo)
		}
	}
	s.log.Info("snapshot restored", "snapshot", short(target.ID), "files", len(res.Changes), "safety", short(safety.ID))
	return res, nil
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
		case strings.ContainsAny(p, "\x00\n\r"):
			return nil, refuse("a path with a NUL or a line break")
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
		case fi.IsDir():
			return "a directory is in the way; move it away first"
		case c.status == 'A':
			// It exists but was not in the tree as it is: ignored, too
			// large, or unreadable. Overwriting it could not be undone.
			return "a file that is in no snapshot (ignored or too large) is in the way; move it away first"
		}
	}
	return ""
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

// checkout writes files of a tree into the workdir with git checkout-index
// from a temporary index: git writes symbolic links as links, sets modes,
// and never writes through a symbolic link on the way.
func (s *Store) checkout(ctx context.Context, tree string, files []change) error {
	index := filepath.Join(s.opt.Dir, "restore.index")
	defer os.Remove(index)
	env := []string{"GIT_INDEX_FILE=" + index}
	if _, err := s.git.run(ctx, call{args: []string{"read-tree", tree}, env: env}); err != nil {
		return err
	}
	var list bytes.Buffer
	for _, c := range files {
		list.WriteString(c.path)
		list.WriteByte(0)
	}
	_, err := s.git.run(ctx, call{args: []string{"checkout-index", "-f", "-q", "-z", "--stdin"}, stdin: &list, env: env, inWork: true})
	return err
}
