package daemon

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

// fillConcurrently posts n checkpoints from 16 writers.
func fillConcurrently(b *testing.B, td *testDaemon, n int, body func(i int) map[string]any) {
	var wg sync.WaitGroup
	per := n / 16
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if s, m := td.do("POST", "/v1/continuity/checkpoint", body(w*per+i)); s != 200 {
					b.Errorf("write: %d %v", s, m)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func pendingOf(td *testDaemon) int {
	return int(td.expectOK("GET", "/v1/status", nil)["agents"].([]any)[0].(map[string]any)["upstreams"].([]any)[0].(map[string]any)["pending"].(float64))
}

// BenchmarkDrainBacklog: a backlog of 10,000 writes that cannot be
// coalesced (each has a decide) drains to an unlimited fake Q-Day; reports
// writes per second and upstream calls.
func BenchmarkDrainBacklog(b *testing.B) {
	const n = 10000
	for range b.N {
		fake := qdaytest.New(qdaytest.Options{Token: "t"})
		fake.SetFailRate(1, qdaytest.Status503) // hold the backlog
		b.Setenv("CD_BENCH_TOKEN", "t")
		cfg := testConfig(b)
		cfg.Outbox.MaxPending = 2 * n
		cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_BENCH_TOKEN",
			Rate: 1e6, Burst: 1000, Timeout: config.Duration{Duration: 5 * time.Second}}}
		cfg.Agents[0].Upstreams = []string{"qday"}
		td := startDaemon(b, cfg)
		fillConcurrently(b, td, n, func(i int) map[string]any {
			return map[string]any{"decide": map[string]any{"chosen": fmt.Sprint("choice ", i), "because": "a backlog that cannot be coalesced"}}
		})
		before := len(fake.Requests())
		fake.SetFailRate(0)
		td.d.snap().agents["builder"].Kick()
		start := time.Now()
		for pendingOf(td) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		el := time.Since(start)
		calls := len(fake.Requests()) - before
		b.ReportMetric(float64(n)/el.Seconds(), "writes/s")
		b.ReportMetric(float64(calls), "upstream-calls")
		td.stop()
		fake.Close()
	}
}

// BenchmarkCoalescing: 1,000 focus-only writes over about ten seconds to an
// upstream limited to 1 call/s: how many calls they took.
func BenchmarkCoalescing(b *testing.B) {
	const n = 1000
	for range b.N {
		fake := qdaytest.New(qdaytest.Options{Token: "t"})
		b.Setenv("CD_BENCH_TOKEN", "t")
		cfg := testConfig(b)
		cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_BENCH_TOKEN",
			Rate: 1, Burst: 1, Timeout: config.Duration{Duration: 5 * time.Second}}}
		cfg.Agents[0].Upstreams = []string{"qday"}
		cfg.Outbox.ResumeTimeout = config.Duration{Duration: time.Millisecond}
		td := startDaemon(b, cfg)
		start := time.Now()
		for i := 0; i < n; i++ {
			td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": fmt.Sprint("focus ", i)})
			time.Sleep(10 * time.Millisecond) // benchmark only: writes paced like an agent's, the pacing measured
		}
		for pendingOf(td) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		el := time.Since(start)
		b.ReportMetric(float64(len(fake.Accepted())), "calls/1000-writes")
		b.ReportMetric(el.Seconds(), "seconds")
		td.stop()
		fake.Close()
	}
}
