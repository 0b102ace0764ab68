package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Version is one version of one file from the version journal: its
// content (a blob in the store) and its git mode.
type Version struct {
	Path string
	Blob repo.OID
	Mode uint32
}

// RestoreVersion brings one version of one file back, as Restore brings
// back a snapshot's: the same checks, the same safety snapshot (so it can
// be undone), the same journaled writes through handles beneath the
// workdir. The version is restored as a tree: the newest snapshot's
// with the file replaced, of which only that path is restored.
func (rs *Restorer) RestoreVersion(ctx context.Context, v Version, dryRun bool) (Result, error) {
	clean, err := rs.checkPaths([]string{v.Path})
	if err != nil {
		return Result{}, err
	}
	if len(clean) != 1 {
		return Result{}, fmt.Errorf("restore: a version names one file, not %d", len(clean))
	}
	v.Path = clean[0]
	return rs.restore(ctx, "", clean, dryRun, nil, &v)
}

// target is the snapshot a restore brings back: a version's tree, the
// tree an interrupted version restore recorded, or the snapshot id names.
// Called with the writer lock held.
func (rs *Restorer) target(ctx context.Context, id string, fin *finishing, ver *Version) (repo.Snapshot, error) {
	switch {
	case ver != nil:
		return rs.versionTree(ctx, *ver)
	case fin != nil && fin.prior.Tree != "":
		return repo.Snapshot{ID: fin.prior.Snapshot, Tree: fin.prior.Tree}, nil
	}
	target, _, err := rs.repo.Resolve(ctx, id, "id")
	return target, err
}

// versionTree writes the tree of the newest snapshot (none: an empty one)
// with v's file in it, and a commit of it that no ref names, through an
// index of its own.
func (rs *Restorer) versionTree(ctx context.Context, v Version) (repo.Snapshot, error) {
	index := filepath.Join(rs.dir, "journal-restore.index")
	defer os.Remove(index)
	env := []string{"GIT_INDEX_FILE=" + index}
	newest, _ := rs.take.Newest()
	read := []string{"read-tree", "--empty"}
	if newest.Tree != "" {
		read = []string{"read-tree", newest.Tree}
	}
	if _, err := rs.git.Run(ctx, repo.Call{Args: read, Env: env}); err != nil {
		return repo.Snapshot{}, fmt.Errorf("restore: %w", err)
	}
	info := strconv.FormatUint(uint64(v.Mode), 8) + "," + v.Blob.String() + "," + v.Path
	if _, err := rs.git.Run(ctx, repo.Call{Args: []string{"update-index", "--add", "--cacheinfo", info}, Env: env}); err != nil {
		return repo.Snapshot{}, fmt.Errorf("restore: the version cannot be placed in a tree: %w", err)
	}
	out, err := rs.git.Run(ctx, repo.Call{Args: []string{"write-tree"}, Env: env})
	if err != nil {
		return repo.Snapshot{}, fmt.Errorf("restore: %w", err)
	}
	tree := strings.TrimSpace(string(out))
	var zw repo.Compressors
	commit, err := rs.repo.WriteLoose("commit", repo.CommitObject(tree, rs.now().Unix(), "continuityd version "+v.Blob.String()+"\n"), &zw)
	if err != nil {
		return repo.Snapshot{}, fmt.Errorf("restore: %w", err)
	}
	return repo.Snapshot{ID: commit.String(), Tree: tree, Time: rs.now()}, nil
}
