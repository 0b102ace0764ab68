package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Change is one entry of `git diff-tree --raw`.
type Change struct {
	Status  byte // 'A', 'M', 'D', 'T'
	OldMode string
	NewMode string
	Path    string
	OldID   string // the blob (or tree, gitlink) on each side; zeros where absent
	NewID   string
}

// GitlinkMode is a nested repository's mode in a Change.
const GitlinkMode = "160000"

// FileChange is one file changed between two trees, with its line
// counts.
type FileChange struct {
	Path         string
	Status       string // StatusAdded, StatusModified or StatusDeleted
	LinesAdded   int
	LinesDeleted int
	Binary       bool // no line counts
}

// Status names of a FileChange.
const (
	StatusAdded    = "added"
	StatusModified = "modified"
	StatusDeleted  = "deleted"
)

// StatusName is the status name of a Change's status.
func StatusName(b byte) string {
	switch b {
	case 'A':
		return StatusAdded
	case 'D':
		return StatusDeleted
	}
	return StatusModified
}

// DiffTree lists what changed between two trees (below paths, if any),
// recursively.
func (r *Repo) DiffTree(ctx context.Context, from, to string, paths ...string) ([]Change, error) {
	var list []Change
	err := r.DiffTreeEach(ctx, from, to, paths, func(c Change) { list = append(list, c) })
	return list, err
}

// DiffTreeEach hands each change between two trees (below paths, if
// any) to each as git writes it.
func (r *Repo) DiffTreeEach(ctx context.Context, from, to string, paths []string, each func(Change)) error {
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--raw", from, to}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	w := &rawReader{each: each}
	_, err := r.git.Run(ctx, Call{Args: args, Stdout: w})
	if err == nil {
		err = w.done()
	}
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	return nil
}

// rawReader reads `git diff-tree -z --raw` output written to it,
// ":old new oldsha newsha S\0path\0" per change, as it comes.
type rawReader struct {
	each    func(Change)
	partial []byte   // a field not yet ended by its NUL
	head    []string // the header of the change whose path comes next
	err     error
}

func (r *rawReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && r.err == nil {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			r.partial = append(r.partial, p...)
			break
		}
		field := string(append(r.partial, p[:i]...))
		r.partial, p = r.partial[:0], p[i+1:]
		switch {
		case r.head != nil:
			r.each(Change{Status: r.head[4][0], OldMode: r.head[0], NewMode: r.head[1], OldID: r.head[2], NewID: r.head[3], Path: field})
			r.head = nil
		case field != "":
			head := strings.Fields(strings.TrimPrefix(field, ":"))
			if !strings.HasPrefix(field, ":") || len(head) != 5 || head[4] == "" {
				r.err = fmt.Errorf("unexpected diff line %q", field)
			}
			r.head = head
		}
	}
	return n, nil
}

// done says whether the output ended where a change does.
func (r *rawReader) done() error {
	if r.err == nil && (r.head != nil || len(r.partial) > 0) {
		r.err = errors.New("the diff ended in the middle of a change")
	}
	return r.err
}

// FileChanges lists the files changed from tree from to tree to (under
// paths, if any), with their line counts, at most max of them.
func (r *Repo) FileChanges(ctx context.Context, from, to string, max int, paths ...string) ([]FileChange, bool, error) {
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", from, to}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	out, err := r.git.Run(ctx, Call{Args: args})
	if err != nil {
		return nil, false, fmt.Errorf("snapshot store: %w", err)
	}
	return parseRawNumstat(out, max)
}

// parseRawNumstat reads `git diff-tree -z --raw --numstat`: all raw
// entries, then all numstat entries ("added\tdeleted\tpath\0", "-\t-\t"
// for binary files), in the same order.
func parseRawNumstat(out []byte, max int) ([]FileChange, bool, error) {
	f := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	var files []FileChange
	i := 0
	for ; i < len(f) && strings.HasPrefix(f[i], ":"); i += 2 {
		head := strings.Fields(f[i][1:])
		if len(head) != 5 || i+1 >= len(f) {
			return nil, false, fmt.Errorf("snapshot store: unexpected diff line %q", f[i])
		}
		files = append(files, FileChange{Path: f[i+1], Status: StatusName(head[4][0])})
	}
	for k := 0; i < len(f) && k < len(files); i, k = i+1, k+1 {
		a, rest, _ := strings.Cut(f[i], "\t")
		dl, _, _ := strings.Cut(rest, "\t")
		if a == "-" {
			files[k].Binary = true
			continue
		}
		files[k].LinesAdded, _ = strconv.Atoi(a)
		files[k].LinesDeleted, _ = strconv.Atoi(dl)
	}
	if len(files) > max {
		return files[:max], true, nil
	}
	return files, false, nil
}
