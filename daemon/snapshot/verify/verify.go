// Package verify checks a snapshot's whole tree before a restore writes
// any of it: a snapshot taken here passes; a forged or damaged one (from
// another machine) is refused whole, and nothing is written.
package verify

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Checker checks snapshots for a restore into one workdir.
type Checker struct {
	repo         *repo.Repo
	work         string   // the workdir
	exclude      []string // absolute paths in it that a restore never writes (the store, the state directory)
	maxFileBytes int64    // the snapshot size limit; negative: none
}

// New checks the snapshots of r for a restore into the workdir work,
// which writes nothing under exclude and no file over maxFileBytes
// (negative: no limit).
func New(r *repo.Repo, work string, exclude []string, maxFileBytes int64) *Checker {
	return &Checker{repo: r, work: work, exclude: exclude, maxFileBytes: maxFileBytes}
}

// Tree checks the whole tree of a snapshot before a restore changes
// anything (and a dry run gives the same verdict): every path as git would
// check it, and ours (no "..", no empty, "." or absolute name, no .git in
// any spelling a file system may fold to it, no name or path too long for
// the disk, nothing in the daemon's own directories), every mode one a
// restore can write, every object present, of its type and within
// MaxFileBytes. A snapshot taken here passes; a forged or damaged one (from
// another machine) is refused whole, as a *capsule.Error naming the first
// problem, and nothing is written.
func (c *Checker) Tree(ctx context.Context, snap repo.Snapshot) error {
	refuse := func(format string, args ...any) error {
		return capsule.Refuse(capsule.CodeInvalidField, "id",
			"snapshot %s cannot be restored, nothing was changed: %s", repo.Short(snap.ID), fmt.Sprintf(format, args...))
	}
	git := c.repo.Git()
	out, err := git.Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-t", "-z", "--full-tree", snap.Tree}})
	if err != nil {
		return refuse("its tree cannot be read (an object is missing or damaged): %v", err)
	}
	type blob struct{ id, path, mode string }
	var blobs []blob
	trees := map[string]bool{}
	treeIDs := []string{snap.Tree}
	seen := map[string]bool{}
	for rec := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, p, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || !repo.ObjectID.MatchString(f[2]) {
			return refuse("ls-tree said %q", rec)
		}
		mode, typ, id := f[0], f[1], f[2]
		if why := c.badPath(p); why != "" {
			return refuse("the path %s %s", strconv.Quote(p), why)
		}
		if seen[p] {
			return refuse("the path %s is in the tree twice", strconv.Quote(p))
		}
		seen[p] = true
		// ls-tree -r -t names each tree before what it holds: a path
		// whose directory was not named came from a name holding "/".
		if dir, _, ok := repo.CutLast(p); ok && !trees[dir] {
			return refuse("the name %s holds a \"/\"", strconv.Quote(p))
		}
		switch {
		case mode == "040000" && typ == "tree":
			trees[p] = true
			treeIDs = append(treeIDs, id)
		case (mode == "100644" || mode == "100755" || mode == "120000") && typ == "blob":
			blobs = append(blobs, blob{id: id, path: p, mode: mode})
		case mode == repo.GitlinkMode && typ == "commit":
			// A nested repository: left alone by Restore and named.
		default:
			return refuse("the path %s has mode %s (%s), which a restore does not write", strconv.Quote(p), mode, typ)
		}
	}
	// git reads a tree's modes canonicalized (100600 as 100644, an
	// unknown one as a gitlink): the trees' own bytes are checked.
	slices.Sort(treeIDs)
	err = c.repo.ReadBatch(ctx, slices.Compact(treeIDs), func(id, _ string, data []byte) error {
		if mode, name, ok := oddMode(data); ok {
			return refuse("the tree %s gives %s the mode %s, which a restore does not write", repo.Short(id), strconv.Quote(name), mode)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(blobs) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, b := range blobs {
		in.WriteString(b.id + "\n")
	}
	// One answer line per line asked, in order.
	info, err := git.Run(ctx, repo.Call{Args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)"}, Stdin: &in})
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(info), "\n"), "\n")
	if len(lines) != len(blobs) {
		return fmt.Errorf("snapshot store: cat-file answered %d lines for %d objects", len(lines), len(blobs))
	}
	for i, b := range blobs {
		f := strings.Fields(lines[i])
		switch {
		case len(f) == 2 && f[1] == "missing":
			return refuse("the content of %s (object %s) is missing", strconv.Quote(b.path), repo.Short(b.id))
		case len(f) != 3 || f[0] != b.id:
			return fmt.Errorf("snapshot store: cat-file said %q for %s", lines[i], b.id)
		case f[1] != "blob":
			return refuse("the content of %s (object %s) is a %s, not a file", strconv.Quote(b.path), repo.Short(b.id), f[1])
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return fmt.Errorf("snapshot store: cat-file gave the size %q for %s", f[2], b.id)
		}
		switch {
		case b.mode == "120000" && (size == 0 || size > repo.MaxLinkBytes):
			return refuse("the symbolic link %s has a target of %d bytes", strconv.Quote(b.path), size)
		case c.maxFileBytes >= 0 && size > c.maxFileBytes:
			return refuse("%s is %d bytes, over the snapshot size limit of %d (max_file_size)", strconv.Quote(b.path), size, c.maxFileBytes)
		}
	}
	return nil
}

// oddMode returns the first entry of a tree object whose mode is not one
// git writes itself.
func oddMode(tree []byte) (mode, name string, ok bool) {
	for len(tree) > 0 {
		head, rest, found := bytes.Cut(tree, []byte{0})
		if !found || len(rest) < 20 {
			return "", "", false // git's own reading of the tree has judged it
		}
		m, n, _ := bytes.Cut(head, []byte{' '})
		switch string(m) {
		case "100644", "100755", "120000", "40000", "160000":
		default:
			return string(m), string(n), true
		}
		tree = rest[20:]
	}
	return "", "", false
}

// badPath says what is wrong with a path of a snapshot's tree as a path a
// restore may write, or "".
func (c *Checker) badPath(p string) string {
	switch {
	case p == "":
		return "is empty"
	case strings.HasPrefix(p, "/"):
		return "is absolute"
	case strings.ContainsAny(p, "\x00"):
		return "holds a NUL"
	case len(c.work)+1+len(p) > repo.MaxPathBytes:
		return fmt.Sprintf("is too long for the disk (%d bytes in the workdir)", len(c.work)+1+len(p))
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return "has an empty name in it"
		case seg == "." || seg == "..":
			return fmt.Sprintf("has %q in it", seg)
		case len(seg) > repo.MaxNameBytes:
			return fmt.Sprintf("has a name of %d bytes, over the disk's %d", len(seg), repo.MaxNameBytes)
		case repo.IsDotGit(seg):
			return "names .git (in some spelling), which a restore never writes"
		}
	}
	abs := filepath.Join(c.work, filepath.FromSlash(p))
	for _, ex := range c.exclude {
		if _, in := repo.Inside(ex, abs); in {
			return "lies in the daemon's own directory"
		}
	}
	return ""
}
