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

// TestByOthersIsTheScans: after random bursts (times out of order), edit
// claims, shells, visits and restores of the State, past the bounds
// (forgotten paths, trimmed histories) and the time index's rebuilds,
// ByOthers answers what a look at every path answers, for each agent.
func TestByOthersIsTheScans(t *testing.T) {
	agents := []string{"builder", "reviewer", "tester"}
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		l := New(Options{MaxPaths: 40, MaxHistory: 3, Since: at(0)})
		for i := range 3000 {
			agent, p := agents[r.IntN(len(agents))], fmt.Sprintf("d%d/f%02d.go", r.IntN(3), r.IntN(25))
			when := at(float64(i/4 + r.IntN(20)))
			var err error
			switch r.IntN(10) {
			case 0:
				_, err = l.Tool(ToolEvent{Agent: agent, Kind: KindEdit, Paths: []string{p}, At: when})
			case 1:
				_, err = l.ShellStart(agent, "call", when)
			case 2:
				_, err = l.ShellEnd(agent, "call", when)
			case 3:
				l.Visit(agent, when)
			case 4:
				if r.IntN(20) == 0 {
					if l, err = Restore(Options{MaxPaths: 40, MaxHistory: 3}, l.State()); err != nil {
						t.Fatal(err)
					}
				}
			default:
				_, err = l.Burst(Burst{Paths: []string{p}, At: when})
			}
			if err != nil {
				t.Fatal(err)
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
