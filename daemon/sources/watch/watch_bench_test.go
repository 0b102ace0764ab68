package watch

// The benchmarks measure the budgets of the work-directory watcher. Each
// iteration is one whole measurement; run them once:
//
//	go test -run '^$' -bench 'EventsCPU|WatchRSS|IdleCPU' -benchtime 1x ./daemon/sources/watch/
//
// BenchmarkEventsCPU   watcher CPU per 10,000 file writes made by another
//                      process, against that process's CPU (target ratio <= 0.15)
// BenchmarkWatchRSS    memory added by watching a 10,000-file tree (100 dirs x 100
//                      files): rss-MiB is the VmRSS delta, rss-total-MiB the whole
//                      test process (target <= 30 MiB)
// BenchmarkIdleCPU     CPU over idle seconds (target: near zero; no polling).
//                      WATCH_IDLE_SECONDS=60 measures the full minute (default 5).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/baseline"
)

const (
	writerEnv   = "WATCH_BENCH_WRITER" // set: the test binary is the writer child
	writerFiles = 10_000
	writerDirs  = 100
)

// benchWriter is the child: it writes writerFiles files (create, write,
// close) under dir and prints the CPU time of that loop alone.
func benchWriter(dir string) int {
	data := []byte("package x\n\nfunc f() int { return 42 }\n")
	c0 := baseline.ProcessCPU()
	for i := range writerFiles {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%writerDirs), fmt.Sprintf("f%05d.go", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Printf("writer-cpu-ns %d\n", baseline.ProcessCPU()-c0)
	return 0
}

func runBenchWatcher(b *testing.B, root string, o Options) (sums chan Summary, w *Watcher, stop func()) {
	b.Helper()
	o.Root = root
	w, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	sums = make(chan Summary, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(s Summary) { sums <- s }) }()
	select {
	case <-w.Ready():
	case err := <-done:
		b.Fatal(err)
	}
	return sums, w, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

func BenchmarkEventsCPU(b *testing.B) {
	if baseline.ProcessCPU() == 0 {
		b.Skip("this platform's process CPU time is not measured")
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var watcherCPU, writerCPU, writerTotal time.Duration
	var events uint64
	for range b.N {
		root := b.TempDir()
		for d := range writerDirs {
			if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("d%02d", d)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		sums, w, stop := runBenchWatcher(b, root, Options{Quiet: 100 * time.Millisecond})
		runtime.GC()
		c0 := baseline.ProcessCPU()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+root)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("writer: %v", err)
		}
		for n := 0; n < writerFiles; {
			select {
			case s := <-sums:
				n += s.Count
			case <-time.After(30 * time.Second):
				b.Fatalf("watcher saw %d of %d files", n, writerFiles)
			}
		}
		watcherCPU += baseline.ProcessCPU() - c0
		events += w.Stats().Events
		stop()
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "writer-cpu-ns "); ok {
				ns, _ := strconv.ParseInt(v, 10, 64)
				writerCPU += time.Duration(ns)
			}
		}
		writerTotal += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	n := float64(b.N)
	b.ReportMetric(float64(watcherCPU.Milliseconds())/n, "watcher-cpu-ms")
	b.ReportMetric(float64(writerCPU.Milliseconds())/n, "writer-cpu-ms")
	b.ReportMetric(float64(writerTotal.Milliseconds())/n, "writer-process-cpu-ms")
	b.ReportMetric(float64(watcherCPU)/float64(writerCPU), "ratio")
	b.ReportMetric(float64(events)/n, "fsnotify-events")
}

func vmRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// makeTree writes dirs×files files.
func makeTree(b *testing.B, dirs, files int) string {
	root := b.TempDir()
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("pkg%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d.go", f)), []byte("package x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

func BenchmarkWatchRSS(b *testing.B) {
	var delta, total, heap float64
	for range b.N {
		root := makeTree(b, 100, 100)
		// Both readings after a GC that returns freed memory to the OS, so
		// the garbage of building the tree does not hide the watcher's cost.
		var ms runtime.MemStats
		debug.FreeOSMemory()
		runtime.ReadMemStats(&ms)
		heap0 := ms.HeapAlloc
		rss0 := vmRSS(b)
		_, w, stop := runBenchWatcher(b, root, Options{})
		debug.FreeOSMemory()
		runtime.ReadMemStats(&ms)
		rss1 := vmRSS(b)
		if got := w.Stats().WatchedDirs; got != 101 {
			b.Fatalf("WatchedDirs = %d, want 101", got)
		}
		delta += float64(rss1-rss0) / (1 << 20)
		total += float64(rss1) / (1 << 20)
		heap += float64(int64(ms.HeapAlloc)-int64(heap0)) / (1 << 20)
		stop()
	}
	n := float64(b.N)
	b.ReportMetric(delta/n, "rss-MiB")
	b.ReportMetric(total/n, "rss-total-MiB")
	b.ReportMetric(heap/n, "heap-MiB")
}

func BenchmarkIdleCPU(b *testing.B) {
	if baseline.ProcessCPU() == 0 {
		b.Skip("this platform's process CPU time is not measured")
	}
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("WATCH_IDLE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	var cpu time.Duration
	var summaries uint64
	for range b.N {
		root := makeTree(b, 100, 100)
		_, w, stop := runBenchWatcher(b, root, Options{})
		runtime.GC()
		c0 := baseline.ProcessCPU()
		time.Sleep(time.Duration(secs) * time.Second) // the idle period whose CPU is measured
		cpu += baseline.ProcessCPU() - c0
		summaries += w.Stats().Summaries
		stop()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms")
	b.ReportMetric(float64(secs), "idle-s")
	b.ReportMetric(float64(summaries)/float64(b.N), "summaries")
}
