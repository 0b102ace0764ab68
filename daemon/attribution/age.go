package attribution

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"time"
)

// ageEntry is a path and the time (Unix ns) of its latest change when it
// was noted.
type ageEntry struct {
	at   int64
	path string
}

// ages orders the paths by the time of their latest change, then by path:
// the order a full ledger forgets them in. It lets forgetOldestPath find
// the oldest without looking at every path (2.2 ms for a 5-path burst
// into a full ledger of 20,000 paths when it did): an entry is pushed at
// each change of a path's latest change, and entries that no longer match
// their path are dropped when they reach the top. A container/heap.
type ages []ageEntry

func (a ages) Len() int { return len(a) }
func (a ages) Less(i, j int) bool {
	return a[i].at < a[j].at || a[i].at == a[j].at && a[i].path < a[j].path
}
func (a ages) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *ages) Push(x any)   { *a = append(*a, x.(ageEntry)) }
func (a *ages) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// latest is the time of p's latest change as the ledger orders its
// paths: the last of its history.
func (l *Ledger) latest(p string) (int64, bool) {
	hist := l.paths[p]
	if len(hist) == 0 {
		return 0, false
	}
	return nanos(hist[len(hist)-1].At), true
}

// noteAge records p's latest change, after its history changed. The heap
// is built anew when stale entries outnumber the paths. Called with l.mu
// held.
func (l *Ledger) noteAge(p string) {
	at, ok := l.latest(p)
	if !ok {
		return
	}
	heap.Push(&l.ages, ageEntry{at, p})
	if len(l.ages) > 2*len(l.paths)+64 {
		l.rebuildAges()
	}
}

// rebuildAges makes the heap from the paths held. Called with l.mu held.
func (l *Ledger) rebuildAges() {
	l.ages = l.ages[:0]
	for p := range l.paths {
		at, _ := l.latest(p)
		l.ages = append(l.ages, ageEntry{at, p})
	}
	heap.Init(&l.ages)
}

// oldestPath is the path whose latest change is the oldest (of those as
// old, the first by name), left on top of the heap; "" when none is held.
// Called with l.mu held.
func (l *Ledger) oldestPath() string {
	for len(l.ages) > 0 {
		top := l.ages[0]
		if at, ok := l.latest(top.path); ok && at == top.at {
			return top.path
		}
		heap.Pop(&l.ages)
	}
	return ""
}

// nanos is t in Unix nanoseconds, clamped to what an int64 holds (a time
// read from a damaged file may lie far outside it): the orders kept here
// compare these.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// timeEntry is a change held: its time (nanos) and its path.
type timeEntry struct {
	at   int64
	path string
}

// noteTime adds a change's entry to l.byTime, in time order (most come
// last). The list is built anew when it has doubled since it last was:
// entries of changes since dropped (a history trimmed, a path forgotten)
// stay until then, and ByOthers, which reads each path's history itself,
// finds nothing through them. Called with l.mu held.
func (l *Ledger) noteTime(at time.Time, p string) {
	e := timeEntry{nanos(at), p}
	l.byTime = slices.Insert(l.byTime, l.firstAfter(e.at), e)
	if len(l.byTime) > 2*l.byTimeBuilt+1024 {
		l.rebuildByTime()
	}
}

// rebuildByTime lists every change held, by time. Called with l.mu held.
func (l *Ledger) rebuildByTime() {
	l.byTime = l.byTime[:0]
	for p, hist := range l.paths {
		for _, c := range hist {
			l.byTime = append(l.byTime, timeEntry{nanos(c.At), p})
		}
	}
	slices.SortFunc(l.byTime, func(a, b timeEntry) int { return cmp.Compare(a.at, b.at) })
	l.byTimeBuilt = len(l.byTime)
}

// firstAfter is the index of l.byTime's first entry later than at.
func (l *Ledger) firstAfter(at int64) int {
	i, _ := slices.BinarySearchFunc(l.byTime, at, func(x timeEntry, t int64) int {
		if x.at <= t {
			return -1
		}
		return 1
	})
	return i
}

// pathsChangedAfter calls each once for every path with a change held
// after since (every path when since is zero). Called with l.mu held.
func (l *Ledger) pathsChangedAfter(since time.Time, each func(p string, hist []Change)) {
	start := 0
	if !since.IsZero() {
		start = l.firstAfter(nanos(since))
	}
	seen := map[string]bool{}
	for _, e := range l.byTime[start:] {
		if seen[e.path] {
			continue
		}
		seen[e.path] = true
		if hist, ok := l.paths[e.path]; ok {
			each(e.path, hist)
		}
	}
}
