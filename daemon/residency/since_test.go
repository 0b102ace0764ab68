package residency

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
)

func noteActivity(t *testing.T, s *Store, paths ...string) {
	t.Helper()
	s.NoteActivity(paths, len(paths))
	// A write for it to ride on: what the test reads next is committed.
	if _, err := s.submit(context.Background(), func(*txn) (uint64, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
}

func wantPaths(t *testing.T, s *Store, paths []string, counts map[string]int) {
	t.Helper()
	slv := s.Resume().SinceLastVisit
	if !slices.Equal(slv.Paths, paths) || !maps.Equal(slv.PathCounts, counts) {
		t.Fatalf("since_last_visit paths %q counts %v, want %q %v", slv.Paths, slv.PathCounts, paths, counts)
	}
}

// TestSinceLastVisitListsEachPathOnce: a path changed twice is listed once,
// with its count, and moves to the end (the most recent).
func TestSinceLastVisitListsEachPathOnce(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	noteActivity(t, s, "main.go", "go.mod")
	noteActivity(t, s, "main.go")
	wantPaths(t, s, []string{"go.mod", "main.go"}, map[string]int{"main.go": 2, "go.mod": 1})
	if n := s.Resume().SinceLastVisit.PathCount; n != 3 {
		t.Fatalf("path_count %d, want 3 (the total of changes)", n)
	}
}

// TestSinceLastVisitResetKeepsWhatCameAfter: the agent's visit clears the
// paths it was shown; a path changed again afterwards is listed with the
// changes since the visit only.
func TestSinceLastVisitResetKeepsWhatCameAfter(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	noteActivity(t, s, "a.go", "b.go")
	noteActivity(t, s, "a.go")
	s.Visited(visitOf(s))      // the visit: its reset commits with the next write
	noteActivity(t, s, "a.go") // after the visit
	wantPaths(t, s, []string{"a.go"}, map[string]int{"a.go": 1})
	if n := s.Resume().SinceLastVisit.PathCount; n != 1 {
		t.Fatalf("path_count %d, want 1", n)
	}
	s.Visited(visitOf(s))
	noteActivity(t, s) // commits the reset
	wantPaths(t, s, []string{}, map[string]int{})
}

// TestSinceResetIsExact: a change that lands between the visit's read and
// its reset survives the reset, counting only the changes after the read.
func TestSinceResetIsExact(t *testing.T) {
	var sp since
	sp.notePaths(1, []string{"a.go", "b.go"})
	sp.notePaths(2, []string{"a.go"})
	m := visitMark{seq: 2, shown: sp.Paths} // what the visit read
	sp.notePaths(3, []string{"a.go"})
	sp.notePaths(4, []string{"a.go", "c.go"})
	sp.resetTo(m, sp.At)
	got := sp.wire()
	if want := []string{"c.go", "a.go"}; !slices.Equal(got.Paths, want) || !maps.Equal(got.PathCounts, map[string]int{"a.go": 2, "c.go": 1}) {
		t.Fatalf("after the reset: %q %v, want %q with a.go twice", got.Paths, got.PathCounts, want)
	}
	if !slices.Equal(pathsOf(m.shown), []string{"b.go", "a.go"}) || m.shown[1].N != 2 {
		t.Fatalf("the visit's view was written: %+v", m.shown)
	}

	// A path evicted after the visit's read and listed again is a new entry:
	// all its changes came after the read.
	sp = since{}
	sp.notePaths(1, []string{"old.go"})
	sp.notePaths(2, []string{"old.go"})
	m = visitMark{seq: 2, shown: sp.Paths}
	for i := range keepSincePaths {
		sp.notePaths(uint64(3+i), []string{fmt.Sprintf("f%03d", i)})
	}
	sp.notePaths(200, []string{"old.go"})
	sp.resetTo(m, sp.At)
	if n := sp.wire().PathCounts["old.go"]; n != 1 {
		t.Fatalf("old.go listed again after eviction: count %d, want 1", n)
	}
}

func pathsOf(ps []seqPath) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.V)
	}
	return out
}

// TestSincePathsBounded: at most keepSincePaths paths are listed, the ones
// changed longest ago leave first; one changed again is kept as recent.
func TestSincePathsBounded(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	noteActivity(t, s, "keep.go")
	for i := range keepSincePaths - 1 {
		noteActivity(t, s, fmt.Sprintf("f%03d", i))
	}
	noteActivity(t, s, "keep.go") // the most recent now
	noteActivity(t, s, "new1", "new2")
	slv := s.Resume().SinceLastVisit
	if len(slv.Paths) != keepSincePaths || len(slv.PathCounts) != keepSincePaths {
		t.Fatalf("%d paths (%d counts), want %d", len(slv.Paths), len(slv.PathCounts), keepSincePaths)
	}
	if slv.Paths[0] != "f002" || slices.Contains(slv.Paths, "f000") || slices.Contains(slv.Paths, "f001") {
		t.Fatalf("the oldest should leave first: %q…", slv.Paths[:3])
	}
	if tail := slv.Paths[len(slv.Paths)-3:]; !slices.Equal(tail, []string{"keep.go", "new2", "new1"}) || slv.PathCounts["keep.go"] != 2 {
		t.Fatalf("most recent last: %q, keep.go count %d", tail, slv.PathCounts["keep.go"])
	}
}

// visitOf is the visit of one read of the resume.
func visitOf(s *Store) Visit {
	_, v := s.Visit()
	return v
}

// TestSinceReadAloneResetsNothing: a read whose answer the agent never
// received (its Visit not confirmed) leaves since_last_visit as it was;
// confirming it later clears what that read showed, and only that.
func TestSinceReadAloneResetsNothing(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	noteActivity(t, s, "a.go")
	_, v := s.Visit()          // the answer never reached the agent
	noteActivity(t, s, "b.go") // commits any reset queued so far
	wantPaths(t, s, []string{"a.go", "b.go"}, map[string]int{"a.go": 1, "b.go": 1})
	s.Visited(v)
	noteActivity(t, s)
	wantPaths(t, s, []string{"b.go"}, map[string]int{"b.go": 1})
}
