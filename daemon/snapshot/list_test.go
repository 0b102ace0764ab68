package snapshot

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// fromRefs is the list as git gives it now, newest first, read without
// the store's cache.
func fromRefs(t *testing.T, s *Store) []Snapshot {
	t.Helper()
	all, err := s.repo.RefsUnder(context.Background(), repo.RefPrefix, false)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b repo.Snapshot) int { return int(b.N) - int(a.N) })
	return snapshotsOf(all)
}

// After a Take the cached list (read by the List before it) holds the new
// snapshot, exactly as the refs list it (so the next List runs no git),
// and stays what git says through Takes and Lists.
func TestListFollowsTakes(t *testing.T) {
	ctx := context.Background()
	wd := t.TempDir()
	write(t, wd, "a.txt", "one\n")
	s := newStore(t, wd, Options{})
	mustTake(t, s, "start", 1)
	if _, err := s.List(ctx); err != nil { // as a burst's work record does
		t.Fatal(err)
	}
	for i := 2; i <= 6; i++ {
		write(t, wd, "a.txt", fmt.Sprintf("%d\n", i))
		snap, isNew := mustTake(t, s, "quiet", uint64(i))
		if !isNew {
			t.Fatalf("take %d: no new snapshot", i)
		}
		c, ok := s.repo.Listed()
		if !ok || len(c) == 0 || c[0].ID != snap.ID {
			t.Fatalf("take %d: the cached list does not begin with the new snapshot %s (cached: %v)", i, snap.ID, c)
		}
		got, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fromRefs(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("take %d: List is\n%+v\nthe refs say\n%+v", i, got, want)
		}
	}
}

// Retention, which deletes refs (by itself, in the background, and when
// asked), leaves List what the refs say.
func TestListAfterRetention(t *testing.T) {
	ctx := context.Background()
	wd := t.TempDir()
	s := newStore(t, wd, Options{KeepCount: 3})
	for i := 1; i <= 6; i++ {
		write(t, wd, "a.txt", fmt.Sprintf("%d\n", i))
		mustTake(t, s, "quiet", uint64(i))
		if _, err := s.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fromRefs(t, s); len(want) != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("after retention List is\n%+v\nthe refs say (3 kept)\n%+v", got, want)
	}
}
