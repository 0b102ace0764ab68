package take

import (
	"bytes"
	"context"
	"fmt"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// The private index: a full add leaves it as the snapshot's tree; a Take
// from what changed stages without it and leaves it behind, to be brought
// up to date before the next full add (sync).

// privateIndex is the state of the store's private index.
type privateIndex struct {
	git  *repo.Git
	work string
	// behind is the tree the last Take from what changed staged in
	// process, which the index does not hold yet ("" when it holds what
	// was staged): sync.
	behind string
	// fixIgnored: check the index for tracked files that became ignored
	// (needsFix).
	fixIgnored bool
}

// sync brings the private index to the tree the last Take from what
// changed staged (those Takes leave it behind): `read-tree --reset` keeps the
// stat data of every entry whose content is the same (--reset: without
// checking the work tree, which may have moved on), so the full add
// that follows reads again only the files that changed.
func (x *privateIndex) sync(ctx context.Context) error {
	if x.behind == "" {
		return nil
	}
	if _, err := x.git.Run(ctx, repo.Call{Args: []string{"read-tree", "--reset", x.behind}}); err != nil {
		return fmt.Errorf("snapshot of %s: %w", x.work, err)
	}
	x.behind = ""
	return nil
}

// entries is how many entries the index holds, 0 when there is none.
func (x *privateIndex) entries() int { return repo.IndexEntries(x.git.Index()) }

// needsFix says whether tracked files may have become ignored: at
// the first Take after Open (the rules may have changed while the daemon
// was away) and whenever a .gitignore changed.
func (x *privateIndex) needsFix(ignoreFileChanged bool) bool {
	if x.fixIgnored {
		x.fixIgnored = false
		return true
	}
	return ignoreFileChanged
}

// dropIgnored removes from the private index the tracked files the ignore
// rules now cover, but those of keep, and reports whether there were any.
func (x *privateIndex) dropIgnored(ctx context.Context, keep []string) (bool, error) {
	out, err := x.git.Run(ctx, repo.Call{Args: []string{"ls-files", "-z", "-c", "-i", "--exclude-standard"}, InWork: true})
	if err != nil {
		return false, fmt.Errorf("snapshot of %s: %w", x.work, err)
	}
	if len(keep) > 0 {
		kept := make(map[string]bool, len(keep))
		for _, p := range keep {
			kept[p] = true
		}
		var rest []byte
		for p := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
			if len(p) > 0 && !kept[string(p)] {
				rest = append(append(rest, p...), 0)
			}
		}
		out = rest
	}
	if len(out) == 0 {
		return false, nil
	}
	if _, err := x.git.Run(ctx, repo.Call{Args: []string{"update-index", "-z", "--force-remove", "--stdin"},
		Stdin: bytes.NewReader(out), InWork: true}); err != nil {
		return false, fmt.Errorf("snapshot of %s: %w", x.work, err)
	}
	return true, nil
}
