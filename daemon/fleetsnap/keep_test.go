package fleetsnap

import (
	"slices"
	"testing"
	"time"
)

// Retention in the fleet keeps the newest keep manifests, fewer when the
// objects they name (each counted once) pass keepBytes, and never fewer
// than the newest.
func TestKeeperBeyond(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	refs := map[string]manifestRefs{
		"snap/a/1": {snapAt: t0, objects: []string{"git/c1", "git/big", "git/shared"}},
		"snap/a/2": {snapAt: t0.Add(time.Minute), objects: []string{"git/c2", "git/shared"}},
		"snap/a/3": {snapAt: t0.Add(2 * time.Minute), objects: []string{"git/c3", "git/shared"}},
	}
	sizes := map[string]int64{"git/c1": 10, "git/c2": 10, "git/c3": 10, "git/big": 1000, "git/shared": 500}
	for _, c := range []struct {
		keep      int
		keepBytes int64
		want      []string
	}{
		{keep: 10, keepBytes: 0, want: nil},
		{keep: 2, keepBytes: 0, want: []string{"snap/a/1"}},
		{keep: 1, keepBytes: 0, want: []string{"snap/a/2", "snap/a/1"}},
		// 3 and 2 share an object: 520 bytes; 1 adds its big one.
		{keep: 10, keepBytes: 600, want: []string{"snap/a/1"}},
		// The newest alone is over: it stays, the others go.
		{keep: 10, keepBytes: 100, want: []string{"snap/a/2", "snap/a/1"}},
	} {
		k := &Keeper{keep: c.keep, keepBytes: c.keepBytes}
		mine := []string{"snap/a/1", "snap/a/3", "snap/a/2"}
		if got := k.beyond(mine, refs, sizes); !slices.Equal(got, c.want) {
			t.Errorf("keep %d, keep_bytes %d: dropped %v, want %v", c.keep, c.keepBytes, got, c.want)
		}
	}
}
