package attribution

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// oldestByScan is forgetOldestPath's choice as it was made before the
// heap: every path looked at.
func oldestByScan(l *Ledger) string {
	var oldest string
	var at time.Time
	first := true
	for p, hist := range l.paths {
		t := hist[len(hist)-1].At
		if first || t.Before(at) || t.Equal(at) && p < oldest {
			oldest, at, first = p, t, false
		}
	}
	return oldest
}

// byOthersByScan is ByOthers as it was answered before the time index:
// every path looked at.
func byOthersByScan(l *Ledger, agent string) []ByOther {
	since := l.visits[agent]
	seen := map[ByOther]bool{}
	out := []ByOther{}
	for p, hist := range l.paths {
		for _, c := range hist {
			if c.By == agent || !c.At.After(since) {
				continue
			}
			if o := (ByOther{Path: p, By: Label(agent, c.By)}); !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b ByOther) int { return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.By, b.By)) })
	return out
}

// TestIndexesAreTheScans: after random events (times out of order, many
// equal), past the bounds (forgotten paths, trimmed histories), the time
// index's rebuilds and restores of the State, the heap names the oldest
// path a look at every path names, a full ledger keeps MaxPaths paths, and
// ByOthers answers what a look at every path answers, for each agent.
func TestIndexesAreTheScans(t *testing.T) {
	o := Options{MaxPaths: 40, MaxHistory: 3, Since: at(0)}
	agents := []string{"builder", "reviewer", "tester"}
	var paths []string
	for d := range 3 {
		for f := range 25 {
			paths = append(paths, fmt.Sprintf("d%d/f%02d.go", d, f))
		}
	}
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		l := New(o)
		for i := range 3000 {
			if r.IntN(200) == 0 {
				var err error
				if l, err = Restore(o, l.State()); err != nil {
					t.Fatal(err)
				}
			}
			randomEvent(t, r, l, agents, paths, at(float64(i/4+r.IntN(20))))
			l.mu.Lock()
			got, want, n := l.oldestPath(), oldestByScan(l), len(l.paths)
			l.mu.Unlock()
			if got != want || n > o.MaxPaths {
				t.Fatalf("seed %d, event %d: the heap names %q, a scan %q; %d paths held (at most %d)", seed, i, got, want, n, o.MaxPaths)
			}
			for _, a := range agents {
				got := l.ByOthers(a)
				l.mu.Lock()
				want := byOthersByScan(l, a)
				l.mu.Unlock()
				if got == nil {
					got = []ByOther{}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d, event %d, %s: ByOthers %v, a scan %v", seed, i, a, got, want)
				}
			}
		}
	}
}
