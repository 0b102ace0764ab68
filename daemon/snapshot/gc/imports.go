package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// The snapshots fetched from another machine keep to the store's
// retention too, and what an interrupted receive or gc left is removed.

// dropImported applies retention to the snapshots fetched from elsewhere:
// the newest KeepCount of them (by the time they were taken) are kept,
// the refs of the others deleted. Called by GC with the writer lock held.
func (c *Collector) dropImported(ctx context.Context) (int, error) {
	imp, err := c.repo.Imported(ctx)
	if err != nil || len(imp) <= c.keepCount {
		return 0, err
	}
	slices.SortFunc(imp, func(a, b repo.Snapshot) int { return b.Time.Compare(a.Time) })
	var b strings.Builder
	for _, snap := range imp[c.keepCount:] {
		fmt.Fprintf(&b, "delete %s%s\n", repo.ImportPrefix, snap.ID)
	}
	if _, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"update-ref", "--stdin"}, Stdin: strings.NewReader(b.String())}); err != nil {
		return 0, fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
	}
	return len(imp) - c.keepCount, nil
}

// dropBrokenImports deletes the refs of imported snapshots that do not
// reach every object they name, and says how many it dropped.
func (c *Collector) dropBrokenImports(ctx context.Context) (int, error) {
	imp, err := c.repo.Imported(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, snap := range imp {
		err := c.repo.CheckConnected(ctx, snap.CommitID())
		if !errors.Is(err, repo.ErrDamaged) {
			continue
		}
		if _, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"update-ref", "-d", repo.ImportPrefix + snap.ID}}); err != nil {
			return n, fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
		}
		c.log.Warn("snapshot store: dropped an imported snapshot that is not whole (git gc failed on it)", "snapshot", snap.ID, "err", err)
		n++
	}
	return n, nil
}

// removeLeftovers deletes what a failed or interrupted git gc leaves
// behind (objects/pack/tmp_*: the packs it was writing; git removes them
// only when a later gc gets as far as pruning) and what a daemon killed
// mid-receive left in incoming/ over an hour ago. Called by GC, one at a
// time: only a GC packs.
func (c *Collector) removeLeftovers() {
	// Under the writer lock: a full Take's git add streams into a
	// temporary pack of its own (core.bigFileThreshold=1) while it runs.
	c.lock.Lock()
	defer c.lock.Unlock()
	dir := c.repo.Dir()
	gone, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*"))
	if ents, err := os.ReadDir(filepath.Join(dir, repo.IncomingDir)); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				gone = append(gone, filepath.Join(dir, repo.IncomingDir, e.Name()))
			}
		}
	}
	for _, p := range gone {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("snapshot store: a temporary file could not be removed", "file", p, "err", err)
		}
	}
	if len(gone) > 0 {
		c.log.Info("snapshot store: removed temporary packs a failed gc left", "files", len(gone))
	}
}
