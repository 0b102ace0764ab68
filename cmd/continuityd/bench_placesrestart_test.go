//go:build linux

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// walkTrees lstats every file of dirs, as the least a restart must do to
// know that nothing changed while no daemon watched; it returns the files.
func walkTrees(b *testing.B, dirs []string) int {
	n := 0
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Name() == ".git" {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(p); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// spread is the median and range of ds, as "median (min–max)".
func spread(ds []time.Duration) (time.Duration, string) {
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	return med, fmt.Sprintf("%s (%s–%s)", med.Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// BenchmarkPlacesRestart (floor: 50 adopted places of 2,000 files each,
// daemon start to all healthy ≤ 3 s, RSS ≤ 96 MiB, idle CPU 0.0% over
// 60 s), paired: the places are adopted once (one session each, through
// the hook command), then CONTINUITYD_BENCH_ROUNDS times (default 5),
// alternating, (a) the floor, an lstat walk of every tree (what any
// restart must do at least to know that nothing changed while the daemon
// was down), and (b) the daemon started again, timed from its exec to
// its socket answering and to every place watched with its parts ok and
// its catch-up snapshot taken ("healthy"), then stopped. After the last
// round the daemon is started once more and left alone for
// CONTINUITYD_BENCH_IDLE seconds (default 60): its CPU time and VmRSS
// from /proc. CONTINUITYD_BENCH_PLACES and CONTINUITYD_BENCH_FILES change
// the 50 and the 2,000. docs/PERFORMANCE.md ("Places") quotes runs:
//
//	go test -run '^$' -bench PlacesRestart -benchtime 1x -timeout 60m ./cmd/continuityd/
func BenchmarkPlacesRestart(b *testing.B) {
	n, files := benchInt("CONTINUITYD_BENCH_PLACES", 50), benchInt("CONTINUITYD_BENCH_FILES", 2000)
	rounds := benchInt("CONTINUITYD_BENCH_ROUNDS", 5)
	idle := time.Duration(benchInt("CONTINUITYD_BENCH_IDLE", 60)) * time.Second
	for i := 0; i < b.N; i++ {
		pb := newPlacesBench(b, fmt.Sprintf("max_watched = %d\n", n+8))
		dirs := make([]string, n)
		for j := range dirs {
			dirs[j] = filepath.Join(pb.home, fmt.Sprintf("project-%02d", j))
			restingProject(b, dirs[j], files)
		}
		pb.start()
		for _, d := range dirs {
			if _, out := pb.session(d); !strings.Contains(out, "# Where project-") {
				b.Fatalf("the session in %s: %q", d, out)
			}
		}
		benchUntil(b, func() string { return "every place's start snapshot: " + pb.stderr.String() }, func() bool { return pb.healthy(n) })
		pb.stop()

		var walks, listening, healthy []time.Duration
		for range rounds {
			began := time.Now()
			if got := walkTrees(b, dirs); got < n*files {
				b.Fatalf("the walk saw %d files, want at least %d", got, n*files)
			}
			walks = append(walks, time.Since(began))
			pb.start()
			benchUntil(b, func() string { return "every place healthy again: " + pb.stderr.String() }, func() bool { return pb.healthy(n) })
			healthy = append(healthy, time.Since(pb.started))
			listening = append(listening, pb.listening.Sub(pb.started))
			pb.c.CloseIdleConnections()
			pb.stop()
		}
		pb.start()
		benchUntil(b, func() string { return "every place healthy: " + pb.stderr.String() }, func() bool { return pb.healthy(n) })
		pid := pb.cmd.Process.Pid
		pb.c.CloseIdleConnections()
		before := cpuTicks(b, pid)
		time.Sleep(idle) // benchmark only: what is measured is the daemon left alone this long
		ticks := cpuTicks(b, pid) - before
		rss := vmRSS(b, pid)
		cpu := float64(ticks) / 100 / idle.Seconds() * 100 // USER_HZ is 100 on Linux

		walk, walkS := spread(walks)
		heal, healS := spread(healthy)
		lis, lisS := spread(listening)
		b.ReportMetric(heal.Seconds(), "start-to-healthy-s")
		b.ReportMetric(lis.Seconds(), "start-to-listening-s")
		b.ReportMetric(walk.Seconds(), "floor-walk-s")
		b.ReportMetric(heal.Seconds()/walk.Seconds(), "healthy/walk")
		b.ReportMetric(rss, "VmRSS-MiB")
		b.ReportMetric(cpu, "idle-CPU-%")
		b.Logf("%d places of %d files, %d rounds (medians, ranges): start to all healthy %s, to listening %s; floor (lstat walk of every tree) %s; VmRSS %.1f MiB, idle CPU %.2f%% (%d ticks in %s)",
			n, files, rounds, healS, lisS, walkS, rss, cpu, ticks, idle)
		pb.stop()
	}
}
