package snapshot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/testkit/baseline"
	"github.com/continuityd/continuityd/internal/testkit/sourcetree"
)

// BenchmarkJournalBurst is the version journal's cost for a burst of 5
// files settling on a large tree (JOURNAL_BENCH_FILES, 100,000 by
// default), beside its floor in the same run: a minimal program storing
// the same bytes as git blobs (hash, compress, write, fsync each and the
// directories), and `git hash-object -w` on the same files. Reported per
// burst: journal-cpu-us, floor-cpu-us, git-cpu-us, their ratios, and the
// p99 time from the files' last write to their versions being durable.
func BenchmarkJournalBurst(b *testing.B) {
	files := 100_000
	if s := os.Getenv("JOURNAL_BENCH_FILES"); s != "" {
		files, _ = strconv.Atoi(s)
	}
	work := b.TempDir()
	sourcetree.Write(b, work, files, 2048)
	s := newStore(b, work, Options{Journal: JournalOptions{Enabled: true}})
	floorDir := b.TempDir()
	floor, err := repo.Open(context.Background(), floorDir, work, s.git.Tool(), s.log, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var journalCPU, floorCPU, gitCPU time.Duration
	b.ResetTimer()
	for i := range b.N {
		burst := make([]string, 5)
		for k := range burst {
			burst[k] = sourcetree.File((i*5 + k) * 7919 % files)
			if err := os.WriteFile(filepath.Join(work, burst[k]), sourcetree.Text(i*1000+k, 2048), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		at := time.Now()
		c0 := baseline.ProcessCPU()
		for _, p := range burst {
			s.Versions.Settled(p, at)
		}
		if err := s.Versions.J.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		c1 := baseline.ProcessCPU()
		journalCPU += c1 - c0
		// The floor: the same bytes as loose git blobs, fsynced.
		var zw repo.Compressors
		for _, p := range burst {
			data, err := os.ReadFile(filepath.Join(work, p))
			if err != nil {
				b.Fatal(err)
			}
			id, err := floor.WriteLoose("blob", append(data, byte(i)), &zw)
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Open(floor.ObjectPath(id))
			if err != nil {
				b.Fatal(err)
			}
			f.Sync()
			f.Close()
			d, _ := os.Open(filepath.Dir(floor.ObjectPath(id)))
			d.Sync()
			d.Close()
		}
		floorCPU += baseline.ProcessCPU() - c1
		g0 := baseline.ChildrenCPU()
		cmd := exec.Command("git", append([]string{"--git-dir", floorDir, "hash-object", "-w", "--"}, burst...)...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git hash-object: %v %s", err, out)
		}
		gitCPU += baseline.ChildrenCPU() - g0
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(journalCPU.Microseconds())/n, "journal-cpu-us/burst")
	b.ReportMetric(float64(floorCPU.Microseconds())/n, "floor-cpu-us/burst")
	b.ReportMetric(float64(gitCPU.Microseconds())/n, "git-cpu-us/burst")
	if floorCPU > 0 {
		b.ReportMetric(float64(journalCPU)/float64(floorCPU), "x-floor")
	}
	if gitCPU > 0 {
		b.ReportMetric(float64(journalCPU)/float64(gitCPU), "x-git")
	}
	lat := s.Versions.J.Latencies()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-durable-ms")
	}
}
