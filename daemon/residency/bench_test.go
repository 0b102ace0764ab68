package residency

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/testkit/baseline"
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
	b.ReportMetric(float64(baseline.Median(st).Microseconds()), "store-p50-µs")
	b.ReportMetric(float64(baseline.Median(ft).Microseconds()), "fsync-p50-µs")
	b.ReportMetric(float64(baseline.Median(st))/float64(baseline.Median(ft)), "ratio")
}

// BenchmarkStoreConcurrentWriters is (c) without the socket: 16 goroutines
// checkpointing through the store against one, beside the bare group
// commit (baseline.GroupCommit) writing the same request body in the same
// directory. Rounds interleave the four phases so all see the same disk;
// each figure is the median over the rounds, ratios taken within a round.
// It shows what the store's group commit gives, and what it costs beside
// the bare one, when no HTTP stands in front of either. The writes are
// explicit, as the API's are, so each commit also encodes the state the
// API would answer with.
func BenchmarkStoreConcurrentWriters(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Options{Agent: "a", Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	gc, err := baseline.OpenGroupCommit(dir, "groupcommit.log", baseline.FileSize)
	if err != nil {
		b.Fatal(err)
	}
	defer gc.Close()
	// The checkpoint the socket benchmarks send, and its request body.
	body := []byte(`{"focus":"ship the parser fix","working_state":{"next_action":"run the fuzzers","last_result":"tests green on linux"},"decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute"}}`)
	ctx := context.Background()
	ours := func() error {
		focus, next, last := "ship the parser fix", "run the fuzzers", "tests green on linux"
		_, err := s.Checkpoint(ctx, &capsule.Checkpoint{
			Focus:        &focus,
			WorkingState: &capsule.WorkingState{NextAction: &next, LastResult: &last},
			Decide:       &capsule.Decision{Chosen: "retry with backoff", Because: "the upstream drops bursts over sixty a minute"},
		}, capsule.OriginExplicit)
		return err
	}
	bare := func() error { return gc.Write(body) }
	n := max(b.N, 160)
	run := func(write func() error, writers, total int) float64 {
		var wg sync.WaitGroup
		per := total / writers
		t0 := time.Now()
		for range writers {
			wg.Go(func() {
				for range per {
					if err := write(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(per*writers) / time.Since(t0).Seconds()
	}

	var r baseline.Rounds
	b.ResetTimer()
	for range 3 {
		o := run(ours, 1, n)
		bo := run(bare, 1, n)
		cs0 := s.CommitStats()
		sx := run(ours, 16, 2*n)
		cs1 := s.CommitStats()
		gc0, gw0 := gc.Counts()
		bs := run(bare, 16, 2*n)
		gc1, gw1 := gc.Counts()
		r.Add(o, sx, bo, bs)
		r.AddCommits(int64(cs1.Commits-cs0.Commits), int64(cs1.Writes-cs0.Writes), gc1-gc0, gw1-gw0)
	}
	b.StopTimer()
	r.Report(b)
}
