//go:build linux

package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/baseline"
	"github.com/continuityd/continuityd/internal/testkit/sourcetree"
)

// BenchmarkSnapshotScaling: for trees of 1,000, 10,000 and (with
// SNAPSHOT_BENCH_100K=1) 100,000 files of source-like text in
// directories of 100, the first snapshot and 5-file bursts, ours against
// git itself in the same run:
//
//   - first: Store.Take of the whole tree in a new store, against `git
//     init && git add -A && git commit` of the same tree in a fresh
//     repository; wall time, CPU (this process and its git children) and
//     peak memory (this process's VmHWM, reset before; git's own maxrss).
//     The plain repository's commits run with gc.auto=0: past 6,700
//     loose objects git commit starts `git gc --auto` in the background,
//     where its time is not counted and it competes with the bursts.
//
//   - burst: 5 files edited, then a snapshot from what changed (the 5
//     paths given to NoteChanged, as the watcher gives them, then Take),
//     against `git add -A && git commit` of the same 5 edits in the plain
//     repository; medians over SNAPSHOT_BENCH_ROUNDS rounds (default 20),
//     the two interleaved in each round.
//
//     go test -run '^$' -bench SnapshotScaling -benchtime 1x ./daemon/snapshot/
//     SNAPSHOT_BENCH_100K=1 go test -run '^$' -bench 'SnapshotScaling/files=100000' -benchtime 1x -timeout 60m ./daemon/snapshot/
func BenchmarkSnapshotScaling(b *testing.B) {
	sizes := []int{1000, 10000}
	if os.Getenv("SNAPSHOT_BENCH_100K") != "" {
		sizes = append(sizes, 100000)
	}
	rounds := 20
	if n, err := strconv.Atoi(os.Getenv("SNAPSHOT_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, files := range sizes {
		b.Run(fmt.Sprint("files=", files), func(b *testing.B) {
			for range b.N {
				benchScaling(b, files, rounds)
			}
		})
	}
}

// cpuNow is the CPU this process and its children have used: those that
// ended, and those still running (the store's long-lived git processes).
func cpuNow() time.Duration {
	return baseline.ProcessCPU() + baseline.ChildrenCPU() + baseline.LiveChildrenCPU()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func benchScaling(b *testing.B, files, rounds int) {
	b.StopTimer()
	ours, plain := b.TempDir(), b.TempDir()
	sourcetree.Write(b, ours, files, 600)
	sourcetree.Write(b, plain, files, 600)
	ctx := context.Background()
	// The trees just written are still going to disk: each side starts
	// with nothing pending, or the first to run pays for the writeback.
	syscall.Sync()

	// The first snapshot, ours first: no git child has run yet, so the
	// children's maxrss afterwards is that of our git runs.
	resetPeakRSS(b)
	s := newStore(b, ours, Options{Dir: filepath.Join(b.TempDir(), "snapshots.git")})
	s.Follow()
	b.StartTimer()
	c, t := cpuNow(), time.Now()
	if _, _, err := s.Take(ctx, "start", 1); err != nil {
		b.Fatal(err)
	}
	firstWall := time.Since(t)
	for !s.gc.Idle() {
		time.Sleep(time.Millisecond)
	}
	firstCPU := cpuNow() - c
	b.StopTimer()
	peak := peakRSS(b)
	gitPeak := childrenMaxRSS()

	syscall.Sync()
	c, t = cpuNow(), time.Now()
	var plainPeak int64
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "gc.auto=0", "commit", "-q", "-m", "start"}} {
		plainPeak = max(plainPeak, plainGitRSS(b, plain, args...))
	}
	plainWall, plainCPU := time.Since(t), cpuNow()-c

	var oursW, oursC, plainW, plainC, walkT, addT, treeT []time.Duration
	for i := range rounds {
		var paths []string
		for k := range 5 {
			f := (i*5 + k) * 1999 % files
			edit(b, ours, f, i)
			edit(b, plain, f, i)
			paths = append(paths, fmt.Sprintf("pkg%03d/file%03d.go", f/100, f%100))
		}
		b.StartTimer()
		c, t = cpuNow(), time.Now()
		s.NoteChanged(paths)
		snap, isNew, err := s.Take(ctx, "quiet", uint64(i+2))
		w := time.Since(t)
		for !s.gc.Idle() { // the collector's look after the Take is ours too
			time.Sleep(time.Millisecond)
		}
		oursW, oursC = append(oursW, w), append(oursC, cpuNow()-c)
		b.StopTimer()
		if err != nil || !isNew || snap.Modified != 5 || !snap.Took.Incremental {
			b.Fatalf("Take: %+v %v %v", snap, isNew, err)
		}
		walkT, addT, treeT = append(walkT, snap.Took.Walk), append(addT, snap.Took.Add), append(treeT, snap.Took.Tree)
		c, t = cpuNow(), time.Now()
		plainGitRSS(b, plain, "add", "-A")
		plainGitRSS(b, plain, "-c", "gc.auto=0", "commit", "-q", "-m", fmt.Sprint("edit ", i))
		plainW, plainC = append(plainW, time.Since(t)), append(plainC, cpuNow()-c)
	}
	ow, oc, pw, pc := baseline.Median(oursW), baseline.Median(oursC), baseline.Median(plainW), baseline.Median(plainC)
	b.ReportMetric(ms(firstWall), "first-ms")
	b.ReportMetric(ms(plainWall), "first-git-ms")
	b.ReportMetric(float64(firstWall)/float64(plainWall), "first-ratio")
	b.ReportMetric(ms(firstCPU), "first-cpu-ms")
	b.ReportMetric(ms(plainCPU), "first-git-cpu-ms")
	b.ReportMetric(float64(peak)/(1<<20), "first-peak-rss-MiB")
	b.ReportMetric(float64(gitPeak)/(1<<20), "first-git-child-rss-MiB")
	b.ReportMetric(float64(plainPeak)/(1<<20), "first-plain-git-rss-MiB")
	b.ReportMetric(ms(ow), "burst-ms")
	b.ReportMetric(ms(pw), "burst-git-ms")
	b.ReportMetric(float64(ow)/float64(pw), "burst-wall-ratio")
	b.ReportMetric(ms(oc), "burst-cpu-ms")
	b.ReportMetric(ms(pc), "burst-git-cpu-ms")
	b.ReportMetric(float64(oc)/float64(pc), "burst-cpu-ratio")
	// Where a burst's wall time goes (Timings): the walk of the changed
	// paths, the files read and written, the trees (the rest: the commit
	// and its ref).
	b.ReportMetric(ms(baseline.Median(walkT)), "burst-walk-ms")
	b.ReportMetric(ms(baseline.Median(addT)), "burst-add-ms")
	b.ReportMetric(ms(baseline.Median(treeT)), "burst-tree-ms")
}

// plainGitRSS runs git in a plain repository as a user would and returns
// its peak resident memory in bytes.
func plainGitRSS(b *testing.B, dir string, args ...string) int64 {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = userGitEnv(dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}

// resetPeakRSS resets this process's VmHWM (Linux: clear_refs 5).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS is this process's VmHWM in bytes.
func peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Logf("no /proc/self/status: %v", err)
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// childrenMaxRSS is the largest peak resident memory of a waited-for
// child of this process, in bytes.
func childrenMaxRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10
}
