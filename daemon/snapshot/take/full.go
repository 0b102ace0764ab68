package take

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// The full add: git add -A of the whole tree into the private index,
// what git could not read named, the mode lines of the tree.

// addRetries is how many times a git add that a file changing under it
// stopped is run again.
const addRetries = 2

// maxStreamedFiles bounds the new files a git add streams into one pack:
// git's bulk check-in looks up each object it writes in a list of those
// written before it, one by one (git 2.39), which at 100,000 new files
// costs more than the loose objects it saves.
const maxStreamedFiles = 16 << 10

// addAll runs `git add -A` of the whole tree into the private index and
// returns the files it could not read. With stream, the files git reads
// go into one pack (see below) instead of a loose object each. --ignore-errors: a file that
// cannot be read (permissions, or gone between the walk and git) is left
// out and named, not a failed snapshot. A git stopped by a file changing
// while it read it (it found fewer bytes than it was told: "failed to
// read"; or a signal) left its index.lock: that is cleared and the add
// run again. git's warnings are logged.
func (t *Taker) addAll(ctx context.Context, stream bool) ([]repo.Skipped, error) {
	for attempt := 0; ; attempt++ {
		var warn string
		threshold := "core.bigFileThreshold=512m" // git's default
		if stream {
			threshold = "core.bigFileThreshold=1"
		}
		// core.bigFileThreshold=1: every file is streamed into one pack
		// (git's bulk check-in) instead of a loose object file each: a
		// third less time for a first snapshot of 10,000 files here, and
		// one file for the collector to repack instead of thousands. It
		// is set for this run only: for the diffs, files stay text.
		c := repo.Call{Args: []string{"-c", threshold, "add", "-A", "--ignore-errors"}, InWork: true, Warnings: &warn}
		_, err := t.git.Run(ctx, c)
		var ge *repo.GitError
		var exit *exec.ExitError
		if errors.As(err, &ge) && errors.As(ge.Err, &exit) && ctx.Err() == nil &&
			(exit.ExitCode() < 0 || strings.Contains(ge.Stderr, "failed to read")) {
			t.repo.ClearStaleLocks()
			if attempt == addRetries {
				return nil, fmt.Errorf("snapshot of %s: git add stopped %d times (a file changing while git reads it?): %w", t.work, attempt+1, err)
			}
			t.log.Warn("snapshot store: git add stopped (a file changed while it read it?); running it again", "err", err)
			continue
		}
		if err == nil {
			t.logWarnings(warn)
			return nil, nil
		}
		unreadable, ok := unreadableFiles(err)
		if !ok {
			return nil, fmt.Errorf("snapshot of %s: %w", t.work, err)
		}
		t.logWarnings(ge.Stderr)
		return unreadable, nil
	}
}

// logWarnings logs git's "warning:" lines.
func (t *Taker) logWarnings(stderr string) {
	for line := range strings.SplitSeq(stderr, "\n") {
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "warning: "); ok {
			t.log.Warn("snapshot store: git warned", "warning", w)
		}
	}
}

// notIgnored returns those of list the ignore rules do not cover, asking
// ignoredOf (a git run) or the long-lived git (Pipes.IgnoredList).
func (t *Taker) notIgnored(ctx context.Context, list []repo.Skipped, ignoredOf func(context.Context, []string) ([]string, error)) ([]repo.Skipped, error) {
	if len(list) == 0 {
		return nil, nil
	}
	paths := make([]string, len(list))
	for i, k := range list {
		paths[i] = k.Path
	}
	ignored, err := ignoredOf(ctx, paths)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(k repo.Skipped) bool { return slices.Contains(ignored, k.Path) }), nil
}

// modeLines are the permission lines of a snapshot's message: the files
// and directories of tree whose permissions git does not keep (keptMode),
// sorted, at most repo.MaxListedModes of them.
func (t *Taker) modeLines(ctx context.Context, tree string, modes map[string]fs.FileMode) (string, error) {
	if len(modes) == 0 {
		return "", nil
	}
	out, err := t.git.Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-t", "-z", "--name-only", "--full-tree", tree}})
	if err != nil {
		return "", fmt.Errorf("snapshot of %s: %w", t.work, err)
	}
	held := map[string]fs.FileMode{}
	for p := range strings.SplitSeq(string(out), "\x00") {
		if m, ok := modes[p]; ok {
			held[p] = m
		}
	}
	return repo.FormatModes(held), nil
}

// forceAdd adds the files of paths that exist in the workdir as files or
// links (not through a link, not over the size limit) to the private
// index, whatever the ignore rules say.
func (t *Taker) forceAdd(ctx context.Context, paths []string) error {
	var list bytes.Buffer
	for _, p := range paths {
		if _, big := t.sizes.files[p]; big || t.walk.symlinkOnPath(p, false) != "" {
			continue
		}
		fi, err := os.Lstat(filepath.Join(t.work, filepath.FromSlash(p)))
		if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			continue
		}
		if t.maxFileBytes >= 0 && fi.Size() > t.maxFileBytes {
			continue
		}
		list.WriteString(p)
		list.WriteByte(0)
	}
	if list.Len() == 0 {
		return nil
	}
	_, err := t.git.Run(ctx, repo.Call{Args: []string{"add", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"},
		Stdin: &list, InWork: true})
	if err != nil {
		if _, ok := unreadableFiles(err); !ok {
			return fmt.Errorf("snapshot of %s: %w", t.work, err)
		}
	}
	return nil
}

// diffCounts are the files added, modified and deleted between two
// trees, and whether a .gitignore is among them.
type diffCounts struct {
	added, modified, deleted int
	ignoreFile               bool
}

func (c *diffCounts) count(status byte, p string) {
	switch status {
	case 'A':
		c.added++
	case 'D':
		c.deleted++
	default:
		c.modified++
	}
	if p == ".gitignore" || strings.HasSuffix(p, "/.gitignore") {
		c.ignoreFile = true
	}
}

// diffCount counts what changed between two trees (git diff-tree --raw),
// reading git's output as it comes: a first snapshot of 100,000 files
// lists them all, and none of it needs keeping.
func (t *Taker) diffCount(ctx context.Context, from, to string) (diffCounts, error) {
	var counts diffCounts
	err := t.repo.DiffTreeEach(ctx, from, to, nil, func(c repo.Change) { counts.count(c.Status, c.Path) })
	return counts, err
}

// unreadableFiles reads the files git add --ignore-errors could not add
// from its error; ok is false when git failed for another reason.
func unreadableFiles(err error) ([]repo.Skipped, bool) {
	var ge *repo.GitError
	if !errors.As(err, &ge) {
		return nil, false
	}
	var list []repo.Skipped
	for line := range strings.SplitSeq(ge.Stderr, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "", line == "fatal: adding files failed", strings.HasPrefix(line, "warning:"):
		case strings.HasPrefix(line, "error: unable to index file '"):
			list = append(list, repo.Skipped{Path: strings.TrimSuffix(strings.TrimPrefix(line, "error: unable to index file '"), "'"), Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: unable to add '") && strings.HasSuffix(line, "' to index"):
			p := strings.TrimSuffix(strings.TrimPrefix(line, "error: unable to add '"), "' to index")
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: open(\""):
			p, _, _ := strings.Cut(strings.TrimPrefix(line, "error: open(\""), "\"):")
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: "):
		default:
			return nil, false
		}
	}
	if len(list) == 0 {
		return nil, false // it failed, and named no file
	}
	// git names a file twice (open, then unable to index): keep one.
	slices.SortFunc(list, func(a, b repo.Skipped) int { return strings.Compare(a.Path, b.Path) })
	list = slices.CompactFunc(list, func(a, b repo.Skipped) bool { return a.Path == b.Path })
	return list, true
}
