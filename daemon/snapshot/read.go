package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Bounds of what Show and Diff return.
const (
	MaxShowFiles     = 5000    // files listed by Show
	DefaultDiffBytes = 1 << 20 // Diff's cap when the caller gives none
)

// List returns the snapshots the store holds, newest first.
func (s *Store) List(ctx context.Context) ([]Snapshot, error) {
	if s.lock.Closed() {
		return nil, ErrClosed
	}
	all, err := s.repo.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", s.opt.Dir, err)
	}
	return snapshotsOf(all), nil
}

// Show returns one snapshot (by id or a unique prefix of 7+ characters)
// with its files and their line counts. An unknown id is a
// *capsule.Error with status 404.
func (s *Store) Show(ctx context.Context, id string) (Detail, error) {
	if s.lock.Closed() {
		return Detail{}, ErrClosed
	}
	if d := s.recent.detail.Load(); d != nil && d.ID == strings.ToLower(strings.TrimSpace(id)) {
		// The snapshot a Take just made, as it made it: no git run.
		c := *d
		c.SkippedFiles, c.Files = slices.Clone(d.SkippedFiles), slices.Clone(d.Files)
		return c, nil
	}
	snap, all, err := s.repo.Resolve(ctx, id, "id")
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Snapshot: snapshotOf(snap, Timings{}), SkippedFiles: []Skipped{}, Files: []FileChange{}}
	msg, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", snap.CommitID()}})
	if err != nil {
		return Detail{}, fmt.Errorf("snapshot store: %w", err)
	}
	if _, body, ok := bytes.Cut(msg, []byte("\n\n")); ok {
		list, more := repo.ParseSkipped(string(body))
		if list != nil {
			d.SkippedFiles = skippedOf(list)
		}
		d.SkippedMore = more
		d.Withheld = withheldOf(repo.ParseWithheld(string(body)))
	}
	from, ok := parentTree(snap, all)
	if !ok {
		d.ParentGone = true
		return d, nil
	}
	files, cut, err := s.repo.FileChanges(ctx, from, snap.Tree, MaxShowFiles)
	d.Files, d.FilesCut = fileChangesOf(files), cut
	return d, err
}

// parentTree is the tree a snapshot is compared with: its parent's, or the
// empty tree for a first snapshot; ok is false when the parent is gone.
func parentTree(snap repo.Snapshot, all []repo.Snapshot) (string, bool) {
	if snap.Parent == "" {
		return repo.EmptyTree, true
	}
	for _, p := range all {
		if p.ID == snap.Parent {
			return p.Tree, true
		}
	}
	return "", false
}

// Diff returns the unified diff of snapshot id against another snapshot
// (against; "" means its parent, or nothing for a first snapshot), at
// most maxBytes long (0: DefaultDiffBytes), cut at a line end; cut says
// it was cut. Binary files are named, not shown.
func (s *Store) Diff(ctx context.Context, id, against string, maxBytes int) (string, bool, error) {
	return s.DiffView(ctx, id, against, maxBytes, View{})
}

// View is what of a diff is shown: the files under Paths (files or
// directories relative to the workdir; none: every file), as the diff or,
// with Stat, as each file's count of lines added and deleted.
type View struct {
	Paths []string
	Stat  bool
}

// pathspecs are v's paths as git's pathspecs, after the checks a path
// relative to the workdir passes. The store's git takes every pathspec
// literally (GIT_LITERAL_PATHSPECS): no glob, no magic a name could hold.
func (v View) pathspecs() ([]string, error) {
	var out []string
	for _, p := range v.Paths {
		refuse := func(why string) error {
			return capsule.Refuse(capsule.CodeInvalidQuery, "path", "%q is %s; give a path relative to the workdir", p, why)
		}
		switch c := path.Clean(filepath.ToSlash(p)); {
		case p == "" || strings.ContainsAny(p, "\x00\n\r"):
			return nil, refuse("empty, or holds a NUL or a line break")
		case path.IsAbs(c) || filepath.IsAbs(p):
			return nil, refuse("an absolute path")
		case c == ".." || strings.HasPrefix(c, "../"):
			return nil, refuse("outside the workdir")
		case c == ".":
			return nil, nil // the whole tree
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// DiffView is Diff showing only what v asks for.
func (s *Store) DiffView(ctx context.Context, id, against string, maxBytes int, v View) (string, bool, error) {
	specs, err := v.pathspecs()
	if err != nil {
		return "", false, err
	}
	if s.lock.Closed() {
		return "", false, ErrClosed
	}
	if maxBytes <= 0 {
		maxBytes = DefaultDiffBytes
	}
	snap, all, err := s.repo.Resolve(ctx, id, "id")
	if err != nil {
		return "", false, err
	}
	var from string
	if against == "" {
		var ok bool
		if from, ok = parentTree(snap, all); !ok {
			return "", false, capsule.Refuse(capsule.CodeNotFound, "against",
				"snapshot %s's parent %s was dropped by retention; diff against a snapshot that is kept", repo.Short(snap.ID), repo.Short(snap.Parent))
		}
	} else {
		other, _, err := s.repo.Resolve(ctx, against, "against")
		if err != nil {
			return "", false, err
		}
		from = other.Tree
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &capWriter{max: maxBytes, cancel: cancel}
	show := []string{"-p"}
	if v.Stat {
		// Names whole (git shortens them to fit its width otherwise).
		show = []string{"--stat=400,360", "--stat-graph-width=40"}
	}
	args := append(append([]string{"diff-tree"}, show...), "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", from, snap.Tree)
	if len(specs) > 0 {
		args = append(append(args, "--"), specs...)
	}
	_, err = s.git.Run(ctx, repo.Call{Args: args, Stdout: w})
	if err != nil && !w.cut {
		return "", false, fmt.Errorf("snapshot store: %w", err)
	}
	text := w.buf.Bytes()
	if w.cut {
		if i := bytes.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		}
	}
	return string(text), w.cut, nil
}

// capWriter keeps the first max bytes and stops git once it has them.
type capWriter struct {
	buf    bytes.Buffer
	max    int
	cut    bool
	cancel context.CancelFunc
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.cut = true
		w.cancel()
		return 0, errCut
	}
	return w.buf.Write(p)
}

var errCut = errors.New("diff cut at its size limit")

var _ io.Writer = (*capWriter)(nil)
