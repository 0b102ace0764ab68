package attribution

import (
	"fmt"
	"math/rand/v2"
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

// TestOldestPathIsTheScansChoice: after random bursts (times out of order
// and equal ones among them), edit claims, shells and restores of the
// State, the heap names the path a scan of every path names, and a full
// ledger keeps MaxPaths paths.
func TestOldestPathIsTheScansChoice(t *testing.T) {
	const maxPaths = 5
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		l := New(Options{MaxPaths: maxPaths, MaxHistory: 2, Since: at(0)})
		for i := range 400 {
			p := fmt.Sprintf("f%02d.go", r.IntN(12))
			when := at(float64(r.IntN(60))) // out of order, often equal
			var err error
			switch r.IntN(6) {
			case 0:
				_, err = l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{p}, At: when})
			case 1:
				_, err = l.ShellStart("reviewer", "call", when)
			case 2:
				_, err = l.ShellEnd("reviewer", "call", when)
			case 3:
				if l, err = Restore(Options{MaxPaths: maxPaths, MaxHistory: 2}, l.State()); err != nil {
					t.Fatal(err)
				}
			default:
				_, err = l.Burst(Burst{Paths: []string{p}, At: when})
			}
			if err != nil {
				t.Fatal(err)
			}
			l.mu.Lock()
			got, want, n := l.oldestPath(), oldestByScan(l), len(l.paths)
			l.mu.Unlock()
			if got != want || n > maxPaths {
				t.Fatalf("seed %d, event %d: the heap names %q, a scan %q; %d paths held (at most %d)", seed, i, got, want, n, maxPaths)
			}
		}
	}
}
