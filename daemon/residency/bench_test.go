package residency

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// BenchmarkStoreCheckpoint: one durable checkpoint through the store (no
// HTTP, no guard) beside a raw append+fsync in the same directory.
func BenchmarkStoreCheckpoint(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Options{Agent: "a", Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	raw, _ := os.OpenFile(filepath.Join(dir, "raw"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	defer raw.Close()
	body := make([]byte, 250)
	var st, ft []time.Duration
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		f := fmt.Sprint("focus ", i)
		t0 := time.Now()
		if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: &f, Decide: &capsule.Decision{Chosen: f, Because: "twenty-four characters at least"}}, capsule.OriginExplicit); err != nil {
			b.Fatal(err)
		}
		st = append(st, time.Since(t0))
		t0 = time.Now()
		raw.Write(body)
		raw.Sync()
		ft = append(ft, time.Since(t0))
	}
	med := func(d []time.Duration) time.Duration { c := slices.Clone(d); slices.Sort(c); return c[len(c)/2] }
	b.ReportMetric(float64(med(st).Microseconds()), "store-p50-µs")
	b.ReportMetric(float64(med(ft).Microseconds()), "fsync-p50-µs")
	b.ReportMetric(float64(med(st))/float64(med(ft)), "ratio")
}
