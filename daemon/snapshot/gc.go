package snapshot

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// GCResult says what a GC did.
type GCResult struct {
	Dropped   int           // snapshots removed by retention
	Kept      int           // snapshots left
	Bytes     int64         // the store's size on disk afterwards
	Took      time.Duration //
	OverBytes bool          // the newest snapshot alone is over KeepBytes
}

// gcEvery is how many new snapshots make NeedsGC true.
const gcEvery = 50

// NeedsGC says whether a GC is due: more snapshots than KeepCount, or
// gcEvery snapshots taken since the last GC (each leaves loose objects).
// It costs nothing; the caller runs GC off the hot path when it is true.
func (s *Store) NeedsGC() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takesSinceG >= gcEvery || s.count > s.opt.KeepCount
}

// GC applies retention and compacts the store: it drops the oldest
// snapshots beyond KeepCount, then more of the oldest while the store is
// over KeepBytes (the newest is always kept), packs what is left and
// deletes the rest. It holds the writer lock (a Take waits for it): run it
// off the hot path, e.g. from a background goroutine when NeedsGC says so.
func (s *Store) GC(ctx context.Context) (GCResult, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return GCResult{}, ErrClosed
	}
	s.clearStaleLocks()
	all, err := s.list(ctx)
	if err != nil {
		return GCResult{}, fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
	}
	var res GCResult
	keep := min(len(all), s.opt.KeepCount)
	if err := s.drop(ctx, all[keep:]); err != nil {
		return res, err
	}
	res.Dropped = len(all) - keep
	if _, err := s.dropImported(ctx); err != nil {
		return res, err
	}
	for {
		if err := s.compact(ctx); err != nil {
			return res, err
		}
		if res.Bytes, err = dirBytes(s.opt.Dir); err != nil {
			return res, fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
		}
		if res.Bytes <= s.opt.KeepBytes || keep <= 1 {
			res.OverBytes = res.Bytes > s.opt.KeepBytes
			break
		}
		// Over the byte budget: drop the oldest quarter of what is left
		// (at least one) and measure again.
		next := keep - max(1, keep/4)
		if err := s.drop(ctx, all[next:keep]); err != nil {
			return res, err
		}
		res.Dropped += keep - next
		keep = next
	}
	res.Kept = keep
	s.count = keep
	s.takesSinceG = 0
	res.Took = time.Since(start)
	if res.Dropped > 0 || res.OverBytes {
		s.log.Info("snapshot store: retention", "dropped", res.Dropped, "kept", res.Kept, "bytes", res.Bytes,
			"keep_count", s.opt.KeepCount, "keep_bytes", s.opt.KeepBytes, "over_bytes", res.OverBytes)
	}
	return res, nil
}

// drop deletes the refs of snapshots, in one transaction.
func (s *Store) drop(ctx context.Context, snaps []Snapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	var b strings.Builder
	for _, snap := range snaps {
		fmt.Fprintf(&b, "delete %s %s\n", refName(snap.n), snap.ID)
	}
	if _, err := s.git.run(ctx, call{args: []string{"update-ref", "--stdin"}, stdin: strings.NewReader(b.String())}); err != nil {
		return fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
	}
	return nil
}

// compact packs the refs and the objects the refs and the private index
// reach and deletes every other object (those of dropped snapshots, of
// dry runs, of Takes killed mid-way). The writer lock is held, so no Take
// is writing objects it has not yet referenced.
func (s *Store) compact(ctx context.Context) error {
	prune := "--prune=now"
	if s.holds.Load() > 0 {
		// An import is writing objects no ref reaches yet (HoldObjects);
		// WriteObject waits for the writer lock, so none lands mid-gc.
		prune = "--prune=1.hour.ago"
	}
	s.removeLeftovers()
	_, err := s.git.run(ctx, call{args: []string{"gc", "--quiet", prune}})
	if err != nil {
		s.removeLeftovers()
		// An import made before imports were checked whole may name a
		// missing object, on which every gc fails: drop it and retry.
		if n, derr := s.dropBrokenImports(ctx); derr == nil && n > 0 {
			_, err = s.git.run(ctx, call{args: []string{"gc", "--quiet", prune}})
			s.removeLeftovers()
		}
	}
	if err != nil {
		return fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
	}
	return nil
}

// dirBytes is the disk space of the files under dir (their sizes).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
