package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// BenchmarkMCPSessionsAndIdleConns: 5,000 MCP sessions nobody closes and
// 1,000 idle keep-alive connections against a daemon subprocess; its RSS
// (VmRSS), live heap (go_memstats_heap_alloc_bytes) and goroutines before, with all of them open, and
// after they expired (mcp_session_idle 20s here; the keep-alive idle
// timeout is the daemon's own 30 s), their garbage was collected (the
// runtime's forced collection, every 2 min) and the pages went back to the
// system.
// docs/PERFORMANCE.md quotes a run:
//
//	go test -run '^$' -bench MCPSessionsAndIdleConns -benchtime 1x ./cmd/continuityd/
func BenchmarkMCPSessionsAndIdleConns(b *testing.B) {
	const sessions, idleConns = 5000, 1000
	t := &testing.T{}
	w := workspaceWith(t, fmt.Sprintf("mcp_session_idle = \"20s\"\nmcp_max_sessions = %d", sessions))
	defer os.RemoveAll(w.dir)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.kill()
	c := p.client()
	defer c.CloseIdleConnections()
	type sample struct {
		rssMB, heapMB float64
		goroutines    int
	}
	measure := func() sample {
		return sample{rssMB: vmRSSMB(b, p.cmd.Process.Pid), heapMB: heapAllocMB(b, c), goroutines: daemonGoroutines(b, c)}
	}
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second) // benchmark only: start-up's own work kept out of the baseline measured
		before := measure()
		t0 := time.Now()
		for s := 0; s < sessions; s++ {
			status, id, out, err := openMCPSession(c)
			if err != nil || status != http.StatusOK || id == "" {
				b.Fatalf("session %d: %v %d %q", s, err, status, out)
			}
		}
		open := time.Since(t0)
		conns := make([]net.Conn, 0, idleConns)
		for k := 0; k < idleConns; k++ {
			conn, err := net.Dial("unix", w.socket)
			if err != nil {
				b.Fatalf("idle connection %d: %v", k, err)
			}
			fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: d\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			conns = append(conns, conn) // kept open, idle
		}
		during := measure()
		// Wait for the sessions (20 s) and the connections (30 s) to
		// expire, then for the garbage they left to be collected: an idle
		// daemon allocates little (these /metrics reads, mostly), so that
		// is the runtime's forced collection, every 2 minutes.
		t1 := time.Now()
		var after sample
		var expiry, collected, returned time.Duration
		for k := 0; ; k++ {
			after = measure()
			if k%5 == 0 {
				b.Logf("%3.0fs: %+v", time.Since(t1).Seconds(), after)
			}
			if expiry == 0 && after.goroutines <= before.goroutines+5 {
				expiry = time.Since(t1)
			}
			if expiry > 0 && collected == 0 && after.heapMB <= before.heapMB+5 {
				collected = time.Since(t1)
			}
			// The runtime keeps some of a larger heap's pages (its goal is
			// twice the live heap, plus stacks); three quarters of the
			// growth given back to the system is "returned".
			if collected > 0 && after.rssMB <= before.rssMB+(during.rssMB-before.rssMB)/4 {
				returned = time.Since(t1)
				break
			}
			if time.Since(t1) > 6*time.Minute {
				break
			}
			time.Sleep(2 * time.Second) // benchmark only: the sampling interval of the measurement
		}
		closed := 0
		for _, conn := range conns {
			conn.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := conn.Read(make([]byte, 1)); err == io.EOF {
				closed++
			}
			conn.Close()
		}
		b.ReportMetric(before.rssMB, "rss-before-MB")
		b.ReportMetric(during.rssMB, "rss-during-MB")
		b.ReportMetric(after.rssMB, "rss-after-MB")
		b.ReportMetric(before.heapMB, "heap-before-MB")
		b.ReportMetric(during.heapMB, "heap-during-MB")
		b.ReportMetric(after.heapMB, "heap-after-MB")
		b.ReportMetric(float64(before.goroutines), "goroutines-before")
		b.ReportMetric(float64(during.goroutines), "goroutines-during")
		b.ReportMetric(float64(after.goroutines), "goroutines-after")
		b.ReportMetric(open.Seconds()*1e6/sessions, "us/session-open")
		b.ReportMetric(expiry.Seconds(), "expiry-s")
		b.ReportMetric(collected.Seconds(), "collected-s")
		b.ReportMetric(returned.Seconds(), "rss-returned-s")
		b.ReportMetric(float64(closed), "idle-conns-closed")
	}
}

var vmRSSLine = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`)

// vmRSSMB is a process's resident set in MB, from /proc.
func vmRSSMB(tb testing.TB, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc here: %v", err)
	}
	m := vmRSSLine.FindSubmatch(raw)
	if m == nil {
		tb.Fatal("no VmRSS in /proc/PID/status")
	}
	kb, _ := strconv.Atoi(string(m[1]))
	return float64(kb) / 1024
}

var heapAllocLine = regexp.MustCompile(`(?m)^go_memstats_heap_alloc_bytes (\S+)`)

// heapAllocMB is the daemon's go_memstats_heap_alloc_bytes in MB.
func heapAllocMB(b *testing.B, c *http.Client) float64 {
	resp, err := c.Get("http://d/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	m := heapAllocLine.FindSubmatch(out)
	if m == nil {
		b.Fatal("no go_memstats_heap_alloc_bytes in /metrics")
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v / (1 << 20)
}
