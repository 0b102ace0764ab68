package baseline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The baseline must really write and sync what it acknowledges, or the
// benchmarks would compare the daemon with a fiction.
func TestGroupCommitWritesEverything(t *testing.T) {
	dir := t.TempDir()
	g, err := OpenGroupCommit(dir, "gc.log", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := g.Write(fmt.Appendf(nil, "<w%d-%d>", w, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	commits, writes := g.Counts()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if writes != writers*each || commits < 1 || commits > writes {
		t.Fatalf("%d writes in %d commits, want %d writes", writes, commits, writers*each)
	}
	data, err := os.ReadFile(filepath.Join(dir, "gc.log"))
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			if rec := fmt.Appendf(nil, "<w%d-%d>", w, i); bytes.Count(data, rec) != 1 {
				t.Fatalf("%s appears %d times in the log", rec, bytes.Count(data, rec))
			}
		}
	}
	if err := g.Write([]byte("late")); err != ErrClosed {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want int
	}{{[]int{3}, 3}, {[]int{5, 1, 3}, 3}, {[]int{4, 1, 3, 2}, 3}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}
