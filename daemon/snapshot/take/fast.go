package take

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/safefile"
)

// A Take from what changed, in process.
//
// The changed paths (roots, none below another) are looked at again and
// everything else is the newest snapshot's tree: for each root, the files
// the walk found there (seenFile) that git add -A would add (those the
// newest snapshot holds, and the new ones the ignore rules leave in) are
// read, hashed and written as blobs; the trees on the way from each root
// to the top are written anew; unchanged subtrees keep their ids. The
// changes against the newest snapshot and their line counts come from the
// same pass. No git process runs but the long-lived ones (repo.Pipes), and
// only for a new file (check-ignore) or a packed object (cat-file).
//
// The private index is not touched: it falls behind, and the next full
// add first brings it to the staged tree (privateIndex.sync), keeping the
// stat data of every file that did not change.

// seenFile is a file or link the walk found, for a Take from what changed.
type seenFile struct {
	path string
	mode fs.FileMode
}

// fromChanged stages a Take from what changed, for its Taker.
type fromChanged struct {
	t     *Taker
	trees treeCache // parsed trees on the changed paths, kept between Takes
}

// maxCachedTreeEntries bounds the parsed trees kept between Takes.
const maxCachedTreeEntries = 64 << 10

// treeCache holds parsed trees by id: a Take from what changed reads the
// trees on the changed paths, mostly the same ones burst after burst.
type treeCache struct {
	m       map[repo.OID][]repo.TreeEntry
	entries int
}

// readTree returns the entries of tree id (the empty tree for the zero id).
func (c *fromChanged) readTree(ctx context.Context, id repo.OID) ([]repo.TreeEntry, error) {
	if id == (repo.OID{}) {
		return nil, nil
	}
	if e, ok := c.trees.m[id]; ok {
		return e, nil
	}
	if c.t.objs.pack != nil {
		if e, ok := c.t.objs.pack.trees[id]; ok {
			return e, nil // written by this Take, not yet in the store
		}
	}
	typ, data, err := c.t.pipes.ReadObject(ctx, id)
	if err != nil {
		return nil, err
	}
	if typ != "tree" {
		return nil, fmt.Errorf("snapshot store: object %s is a %s where a tree was expected: %w", id, typ, repo.ErrDamaged)
	}
	entries, err := repo.ParseTree(data)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: tree %s: %v: %w", id, err, repo.ErrDamaged)
	}
	if c.trees.m == nil || c.trees.entries+len(entries) > maxCachedTreeEntries {
		c.trees = treeCache{m: map[repo.OID][]repo.TreeEntry{}}
	}
	c.trees.m[id] = entries
	c.trees.entries += len(entries)
	return entries, nil
}

// lookup finds the entry at p (relative, with "/") in tree root.
func (c *fromChanged) lookup(ctx context.Context, root repo.OID, p string) (repo.TreeEntry, bool, error) {
	cur := repo.TreeEntry{Mode: repo.ModeTree, ID: root}
	for name := range strings.SplitSeq(p, "/") {
		if !cur.IsTree() {
			return repo.TreeEntry{}, false, nil
		}
		entries, err := c.readTree(ctx, cur.ID)
		if err != nil {
			return repo.TreeEntry{}, false, err
		}
		i := slices.IndexFunc(entries, func(e repo.TreeEntry) bool { return e.Name == name })
		if i < 0 {
			return repo.TreeEntry{}, false, nil
		}
		cur = entries[i]
	}
	return cur, true, nil
}

// filesUnder adds the files (blobs, links) at and below entry e, found at
// path p, to out.
func (c *fromChanged) filesUnder(ctx context.Context, e repo.TreeEntry, p string, out map[string]repo.TreeEntry) error {
	if !e.IsTree() {
		out[p] = e
		return nil
	}
	entries, err := c.readTree(ctx, e.ID)
	if err != nil {
		return err
	}
	for _, child := range entries {
		if err := c.filesUnder(ctx, child, p+"/"+child.Name, out); err != nil {
			return err
		}
	}
	return nil
}

// errNotFast says a Take from what changed cannot vouch for its result:
// the whole tree is added instead.
var errNotFast = errors.New("the changed paths need a full add")

// stage stages the roots (see the comment at the top) over the
// newest snapshot's tree; found is walkChanged's. errNotFast: a full add
// must decide (no snapshot yet, an ignore file among the changed files).
func (c *fromChanged) stage(ctx context.Context, roots []string, found walked) (staged, error) {
	var st staged
	base, ok := repo.ParseOID(c.t.newest.Tree)
	if c.t.newest.N == 0 || !ok {
		return st, errNotFast
	}
	for _, f := range found.files {
		if filepath.Base(f.path) == ".gitignore" {
			return st, errNotFast // the rules changed: git decides anew for the whole tree
		}
	}
	for _, r := range roots {
		if c.t.walk.symlinkOnPath(r, false) != "" {
			// A directory on the way became a link: the walk of r went
			// through it, out of the tree; git stores the link.
			return st, errNotFast
		}
	}
	old := map[string]repo.TreeEntry{}
	for _, r := range roots {
		e, ok, err := c.lookup(ctx, base, r)
		if err != nil {
			return st, err
		}
		if ok {
			if err := c.filesUnder(ctx, e, r, old); err != nil {
				return st, err
			}
		}
	}
	// A file over the size limit that the rules ignore is not in the
	// exclusions git add -A reads: when tracked (a restore's safety
	// snapshot forced it in), git updates it as any tracked file.
	for p := range c.t.sizes.ignored {
		if _, tracked := old[p]; tracked {
			if fi, err := os.Lstat(filepath.Join(c.t.work, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
				found.files = append(found.files, seenFile{path: p, mode: fi.Mode()})
			}
		}
	}
	// git add -A adds a file it tracks, and a new one the rules leave in.
	var fresh []string
	for _, f := range found.files {
		if _, tracked := old[f.path]; !tracked {
			fresh = append(fresh, f.path)
		}
	}
	ignored, err := c.t.pipes.Ignored(ctx, fresh)
	if err != nil {
		return st, err
	}

	counting := len(roots) <= maxCountedPaths
	content := map[string][]byte{}
	kept := 0
	now := map[string]repo.TreeEntry{}
	for _, f := range found.files {
		if ignored[f.path] {
			continue
		}
		e, data, err := c.storeFile(f)
		switch {
		case errors.Is(err, errNotFast):
			return st, err
		case errors.Is(err, fs.ErrNotExist):
			continue // gone since the walk
		case err != nil:
			// git add --ignore-errors keeps what it tracked of a file it
			// cannot read, and names it.
			st.skipped = append(st.skipped, repo.Skipped{Path: f.path, Reason: repo.ReasonUnreadable})
			if o, ok := old[f.path]; ok {
				now[f.path] = o
			}
			continue
		}
		now[f.path] = e
		if counting && kept+len(data) <= maxCountedBytes {
			content[f.path] = data
			kept += len(data)
		} else {
			counting = false
		}
	}
	edits := map[string]*repo.TreeEntry{}
	for p, o := range old {
		if n, ok := now[p]; !ok {
			edits[p] = nil
			st.changes = append(st.changes, repo.Change{Status: 'D', OldMode: modeString(o.Mode), NewMode: "000000", Path: p, OldID: o.ID.String(), NewID: zeroID})
		} else if n != o {
			status := byte('M')
			if (n.Mode == repo.ModeLink) != (o.Mode == repo.ModeLink) {
				status = 'T'
			}
			edits[p] = &n
			st.changes = append(st.changes, repo.Change{Status: status, OldMode: modeString(o.Mode), NewMode: modeString(n.Mode), Path: p, OldID: o.ID.String(), NewID: n.ID.String()})
		}
	}
	for p, n := range now {
		if _, ok := old[p]; !ok {
			edits[p] = &n
			st.changes = append(st.changes, repo.Change{Status: 'A', OldMode: "000000", NewMode: modeString(n.Mode), Path: p, OldID: zeroID, NewID: n.ID.String()})
		}
	}
	slices.SortFunc(st.changes, func(a, b repo.Change) int { return strings.Compare(a.Path, b.Path) })
	for _, c := range st.changes {
		st.counts.count(c.Status, c.Path)
	}

	c.t.reach(PointBlobs)
	c.t.setStep(StepTree)
	treeStart := time.Now()
	tree := base
	if len(edits) > 0 {
		id, empty, err := c.applyEdits(ctx, base, edits)
		if err != nil {
			return st, err
		}
		if tree = id; empty {
			tree = oidOf(repo.EmptyTree)
		}
	}
	st.tree = tree.String()
	c.t.index.behind = st.tree
	c.t.reach(PointTrees)
	if counting && len(st.changes) <= maxCountedPaths {
		if st.files, err = c.countChanged(ctx, st.changes, content); err != nil {
			return st, err
		}
	}
	st.took.Tree = time.Since(treeStart)
	return st, nil
}

// maxCountedBytes bounds what a Take from what changed keeps of the
// files it read, to count their lines; past it Show counts them with git.
const maxCountedBytes = 32 << 20

const zeroID = "0000000000000000000000000000000000000000"

func oidOf(s string) repo.OID {
	o, _ := repo.ParseOID(s)
	return o
}

func modeString(m uint32) string { return fmt.Sprintf("%06o", m) }

// storeFile reads file f of the workdir and writes it as a blob (a link:
// its target), returning its tree entry and what it read.
func (c *fromChanged) storeFile(f seenFile) (repo.TreeEntry, []byte, error) {
	abs := filepath.Join(c.t.work, filepath.FromSlash(f.path))
	e := repo.TreeEntry{Name: f.path[strings.LastIndexByte(f.path, '/')+1:], Mode: repo.ModeFile}
	var data []byte
	if f.mode&fs.ModeSymlink != 0 {
		target, err := os.Readlink(abs)
		if err != nil {
			return e, nil, err
		}
		e.Mode, data = repo.ModeLink, []byte(target)
	} else {
		// safefile: a named pipe put where the walk saw a file is not
		// waited on, and a link put there is not followed (both are the
		// next Take's, as the watcher reports them).
		file, fi, err := safefile.Open(abs)
		if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink) {
			return e, nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		}
		if err != nil {
			return e, nil, err
		}
		if fi.Mode()&0o100 != 0 {
			e.Mode = repo.ModeExec // git keeps the owner's execute bit only
		}
		data, err = safefile.ReadAll(file, fi, abs, repo.MaxObjectBytes)
		file.Close()
		if errors.Is(err, safefile.ErrTooLarge) {
			return e, nil, errNotFast // no size limit set, and a file too large to hold: git reads it
		}
		if err != nil {
			return e, nil, err
		}
	}
	id, err := c.t.objs.write("blob", data)
	if err != nil {
		return e, nil, err
	}
	e.ID = id
	return e, data, nil
}

// applyEdits writes the trees of tree id with the files of edits (paths
// relative to it; nil deletes) set; empty says nothing is left.
func (c *fromChanged) applyEdits(ctx context.Context, id repo.OID, edits map[string]*repo.TreeEntry) (repo.OID, bool, error) {
	entries, err := c.readTree(ctx, id)
	if err != nil {
		return repo.OID{}, false, err
	}
	byName := make(map[string]repo.TreeEntry, len(entries))
	for _, e := range entries {
		byName[e.Name] = e
	}
	leaf := map[string]*repo.TreeEntry{}
	sub := map[string]map[string]*repo.TreeEntry{}
	for p, e := range edits {
		name, rest, deeper := strings.Cut(p, "/")
		if !deeper {
			leaf[name] = e
			continue
		}
		if sub[name] == nil {
			sub[name] = map[string]*repo.TreeEntry{}
		}
		sub[name][rest] = e
	}
	for name, e := range leaf {
		if _, below := sub[name]; below {
			continue // decided with what lies below
		}
		if e == nil {
			delete(byName, name)
		} else {
			byName[name] = *e
		}
	}
	for name, below := range sub {
		var inner repo.OID
		if e, ok := byName[name]; ok && e.IsTree() {
			inner = e.ID
		}
		id, empty, err := c.applyEdits(ctx, inner, below)
		if err != nil {
			return repo.OID{}, false, err
		}
		switch e := leaf[name]; {
		case e != nil && !empty:
			return repo.OID{}, false, fmt.Errorf("snapshot store: %s is both a file and a directory in one Take", name)
		case e != nil:
			byName[name] = *e
		case empty:
			delete(byName, name)
		default:
			byName[name] = repo.TreeEntry{Name: name, Mode: repo.ModeTree, ID: id}
		}
	}
	if len(byName) == 0 {
		return repo.OID{}, true, nil
	}
	out := slices.Collect(maps.Values(byName))
	data := repo.EncodeTree(out)
	newID, err := c.t.objs.write("tree", data)
	if err != nil {
		return repo.OID{}, false, err
	}
	if c.t.objs.pack != nil {
		c.t.objs.pack.trees[newID] = out
	}
	if c.trees.m != nil && c.trees.entries+len(out) <= maxCachedTreeEntries {
		c.trees.m[newID] = out
		c.trees.entries += len(out)
	}
	return newID, false, nil
}

// modeLines is Taker.modeLines for a tree staged from what changed:
// the permissions of the paths tree holds, looked up in the tree instead
// of listing it whole (unless there are many).
func (c *fromChanged) modeLines(ctx context.Context, tree string, modes map[string]fs.FileMode) (string, error) {
	if len(modes) > repo.MaxListedModes {
		return c.t.modeLines(ctx, tree, modes)
	}
	held := map[string]fs.FileMode{}
	for p, m := range modes {
		if _, ok, err := c.lookup(ctx, oidOf(tree), p); err != nil {
			return "", err
		} else if ok {
			held[p] = m
		}
	}
	return repo.FormatModes(held), nil
}
