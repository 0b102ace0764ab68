package take

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// The files over the snapshot size limit, and the nested repositories:
// left out of git add -A by the store's core.excludesFile, and named in
// each snapshot.

// oversize is what the last Take left out for its size.
type oversize struct {
	git   *repo.Git
	pipes *repo.Pipes
	dir   string // the store
	work  string
	// files are the files skipped for their size at the last Take (nested
	// repositories as repoSize); ignored those over the size that the
	// ignore rules leave out anyway.
	files, ignored map[string]int64
}

// skipped names the files skipped for their size and the nested
// repositories, as the last exclude left them.
func (o *oversize) skipped() []repo.Skipped {
	var list []repo.Skipped
	for _, p := range sortedKeys(o.files) {
		if n := o.files[p]; n == repoSize {
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonRepository})
		} else {
			list = append(list, repo.Skipped{Path: p, Size: n, Reason: repo.ReasonTooLarge})
		}
	}
	return list
}

// exclude brings the list of files skipped for their size up to
// date: written to the store's core.excludesFile (so git add -A leaves
// them out without reading them) and removed from the private index when
// they were tracked before they grew. A Take from what changed (fast)
// asks the long-lived check-ignore and leaves the index alone: it stages
// without it, and the index is brought to what it staged later (sync).
func (o *oversize) exclude(ctx context.Context, over map[string]int64, fast bool) error {
	// Big files that the ignore rules leave out anyway are not "skipped":
	// they would never be in a snapshot. Each is asked about once (again
	// when its size changes).
	var unknown []string
	bigIgnored := map[string]int64{}
	for p, n := range over {
		if m, ok := o.files[p]; ok && m == n {
			continue
		}
		if m, ok := o.ignored[p]; ok && m == n {
			bigIgnored[p] = n
			delete(over, p)
			continue
		}
		if _, ok := o.files[p]; !ok {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) > 0 {
		ignoredOf := o.ignoredOf
		if fast {
			ignoredOf = o.pipes.IgnoredList
		}
		ignored, err := ignoredOf(ctx, unknown)
		if err != nil {
			return err
		}
		for _, p := range ignored {
			bigIgnored[p] = over[p]
			delete(over, p)
		}
	}
	o.ignored = bigIgnored

	var fresh bytes.Buffer
	var repos []string
	changed := len(over) != len(o.files)
	for p, n := range over {
		if _, ok := o.files[p]; !ok {
			changed = true
			fresh.WriteString(p)
			fresh.WriteByte(0)
			if n == repoSize {
				repos = append(repos, p)
			}
		}
	}
	if len(repos) > 0 && !fast {
		// A directory that became a repository: the files tracked in it
		// leave the index (git add -A would keep them, and update-index
		// takes files, not directories).
		out, err := o.git.Run(ctx, repo.Call{Args: append([]string{"ls-files", "-z", "-c", "--"}, repos...), InWork: true})
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", o.work, err)
		}
		fresh.Write(out)
	}
	if changed {
		var b strings.Builder
		b.WriteString("# files over the snapshot size limit, written by continuityd\n")
		for _, p := range sortedKeys(over) {
			if over[p] == repoSize {
				b.WriteString("/" + repo.EscapeGlob(p) + "/\n")
			} else {
				b.WriteString("/" + repo.EscapeGlob(p) + "\n")
			}
		}
		if err := repo.WriteIfChanged(filepath.Join(o.dir, repo.OversizedFile), []byte(b.String())); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
	}
	if fresh.Len() > 0 && !fast {
		// Tracked before it grew: git add -A would read it again.
		if _, err := o.git.Run(ctx, repo.Call{Args: []string{"update-index", "-z", "--force-remove", "--stdin"},
			Stdin: &fresh, InWork: true}); err != nil {
			return fmt.Errorf("snapshot of %s: %w", o.work, err)
		}
	}
	o.files = over
	return nil
}

// ignoredOf returns those of paths the ignore rules cover (the size
// exclusions themselves not counted).
func (o *oversize) ignoredOf(ctx context.Context, paths []string) ([]string, error) {
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	args := []string{"-c", "core.excludesFile=/dev/null", "check-ignore", "-z", "--no-index", "--stdin"}
	// check-ignore refuses literal pathspec magic; it matches paths, not
	// patterns, anyway.
	out, err := o.git.Run(ctx, repo.Call{Args: args, Stdin: &in, InWork: true, Env: []string{"GIT_LITERAL_PATHSPECS=0"}})
	var ge *repo.GitError
	if errors.As(err, &ge) && len(out) == 0 && ge.Stderr == "" {
		return nil, nil // exit 1: none ignored
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", o.work, err)
	}
	var ignored []string
	for p := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			ignored = append(ignored, p)
		}
	}
	return ignored, nil
}
