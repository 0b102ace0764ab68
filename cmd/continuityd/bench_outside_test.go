package main

// BenchmarkOutside measures the core path as an agent meets it: a real
// daemon subprocess, driven over its socket from this process, beside the
// floors any server on this machine stands on, each served by a child
// process of its own so that it pays the same process boundary:
//
//	go test -run '^$' -bench Outside -benchtime 1x -count 5 ./cmd/continuityd/
//
// docs/perf/outside.sh runs the same measurement with the standalone
// program the goals were first taken with, against a daemon it starts.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/baseline"
)

// floorEnv asks the test binary to serve the floors (see floorMain): its
// value is the directory for their sockets and files.
const floorEnv = "CONTINUITYD_BENCH_FLOORS"

func init() { children[floorEnv] = floorMain }

// outsideBody is a checkpoint as small as a hook's.
var outsideBody = []byte(`{"focus":"measure the checkpoint path","working_state":{"next_action":"compare with raw fsync"}}`)

// floorMain serves, on three sockets in its directory, what a server with
// none of continuityd's work does: static.sock answers every request with
// the bytes of doc.json (the resume it stands beside), durable.sock appends
// the body to a file and fsyncs it before answering, and group.sock does
// the same with one fsync for every body waiting (a bare group commit).
// It prints "ready" once all three listen and serves until killed.
func floorMain() int {
	dir := os.Getenv(floorEnv)
	doc, err := os.ReadFile(filepath.Join(dir, "doc.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	answer := bytes.Repeat([]byte("y"), 1500) // about a checkpoint's answer
	durable, err1 := os.OpenFile(filepath.Join(dir, "durable.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	group, err2 := os.OpenFile(filepath.Join(dir, "group.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, err1, err2)
		return 1
	}
	var durableMu sync.Mutex
	gc := &bareGroup{f: group, kick: make(chan struct{}, 1)}
	go gc.run()
	handlers := map[string]http.HandlerFunc{
		"static.sock": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc)
		},
		"durable.sock": func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			durableMu.Lock()
			durable.Write(b)
			durable.Sync()
			durableMu.Unlock()
			w.Write(answer)
		},
		"group.sock": func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			<-gc.add(b)
			w.Write(answer)
		},
	}
	for name, h := range handlers {
		ln, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go http.Serve(ln, h)
	}
	fmt.Println("ready")
	select {}
}

// bareGroup is the textbook group commit: add appends under a lock and
// kicks the committer, which takes everything added so far, fsyncs once
// and answers them all.
type bareGroup struct {
	mu      sync.Mutex
	f       *os.File
	waiting []chan struct{}
	kick    chan struct{}
}

func (g *bareGroup) add(b []byte) chan struct{} {
	done := make(chan struct{})
	g.mu.Lock()
	g.f.Write(b)
	g.waiting = append(g.waiting, done)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	return done
}

func (g *bareGroup) run() {
	for range g.kick {
		g.mu.Lock()
		batch := g.waiting
		g.waiting = nil
		g.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		g.f.Sync()
		for _, d := range batch {
			close(d)
		}
	}
}

// unixClient is an HTTP client on a Unix socket, keeping connections for
// 16 writers at once.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

// exchange makes one request and reads the whole answer; anything but 200
// fails the benchmark (a figure of refusals would be meaningless).
func exchange(b *testing.B, c *http.Client, method, url string, body []byte) []byte {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s %s: %d %v %s", method, url, resp.StatusCode, err, raw)
	}
	return raw
}

// startFloors starts the floor server as a child process serving doc.
func startFloors(b *testing.B, dir string, doc []byte) {
	if err := os.WriteFile(filepath.Join(dir, "doc.json"), doc, 0o600); err != nil {
		b.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		b.Fatalf("the floor server did not start: %q %v", line, err)
	}
}

// BenchmarkOutside reports, for each b.N (one full measurement each):
// ack-vs-durable (a durable checkpoint ack over a bare durable server's),
// resume-ratio (resume over a static handler serving the same bytes) and
// vs-group-commit (16 writers' throughput over a bare group commit's, the
// median of five interleaved rounds), with the medians they come from.
//
// The static floor answers right after the durable one, in the same
// process, which is still awake; resume reaches a daemon that last
// answered two exchanges before. resume-vs-idle-static sets resume beside
// the same static handler in a second floor process that was idle as long
// (timed right after resume): what waking an idle process costs any
// server on this machine, apart from what resume does.
func BenchmarkOutside(b *testing.B) {
	w := newWorkspace(&testing.T{})
	defer os.RemoveAll(w.dir)
	p := startProc(&testing.T{}, w.socket, nil, "run", "--config", w.config)
	defer p.kill()
	floors := filepath.Join(w.dir, "floors")
	if err := os.Mkdir(floors, 0o700); err != nil {
		b.Fatal(err)
	}
	const base = "http://continuityd"
	checkpoint, resume := base+"/v1/continuity/checkpoint?agent=builder", base+"/v1/continuity?agent=builder"
	dc := unixClient(w.socket)
	defer dc.CloseIdleConnections()
	// The static floor serves the very bytes of this agent's resume, so
	// the ratio is the cost of making the document, not of its size.
	exchange(b, dc, "POST", checkpoint, outsideBody)
	doc := exchange(b, dc, "GET", resume+"&peek=1", nil)
	startFloors(b, floors, doc)
	sc, durc, gc := unixClient(filepath.Join(floors, "static.sock")), unixClient(filepath.Join(floors, "durable.sock")), unixClient(filepath.Join(floors, "group.sock"))
	idleFloors := filepath.Join(w.dir, "idle-floors")
	if err := os.Mkdir(idleFloors, 0o700); err != nil {
		b.Fatal(err)
	}
	startFloors(b, idleFloors, doc)
	ic := unixClient(filepath.Join(idleFloors, "static.sock"))
	raw, err := os.OpenFile(filepath.Join(floors, "raw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	timed := func(ds *[]time.Duration, f func()) {
		t0 := time.Now()
		f()
		*ds = append(*ds, time.Since(t0))
	}
	// writers is the throughput of n concurrent writers making total
	// writes to url through c.
	writers := func(c *http.Client, url string, n, total int) float64 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for range n {
			wg.Go(func() {
				for range total / n {
					exchange(b, c, "POST", url, outsideBody)
				}
			})
		}
		wg.Wait()
		return float64(total/n*n) / time.Since(t0).Seconds()
	}
	var ackR, resumeR, idleR, groupR []float64
	b.ResetTimer()
	for range b.N {
		var fsync, ack, durable, static, res, idle []time.Duration
		for range 300 { // interleaved, so drift hits every side alike
			timed(&fsync, func() {
				raw.Write(outsideBody)
				if err := raw.Sync(); err != nil {
					b.Fatal(err)
				}
			})
			timed(&ack, func() { exchange(b, dc, "POST", checkpoint, outsideBody) })
			timed(&durable, func() { exchange(b, durc, "POST", base+"/durable", outsideBody) })
			timed(&static, func() { exchange(b, sc, "GET", base+"/static", nil) })
			timed(&res, func() { exchange(b, dc, "GET", resume, nil) })
			timed(&idle, func() { exchange(b, ic, "GET", base+"/static", nil) })
		}
		var rounds []float64
		for range 5 {
			ours := writers(dc, checkpoint, 16, 960)
			rounds = append(rounds, ours/writers(gc, base+"/group", 16, 960))
		}
		ackR = append(ackR, float64(baseline.Median(ack))/float64(baseline.Median(durable)))
		resumeR = append(resumeR, float64(baseline.Median(res))/float64(baseline.Median(static)))
		idleR = append(idleR, float64(baseline.Median(res))/float64(baseline.Median(idle)))
		groupR = append(groupR, baseline.Median(rounds))
		b.ReportMetric(float64(baseline.Median(ack).Microseconds()), "ack-p50-µs")
		b.ReportMetric(float64(baseline.Median(durable).Microseconds()), "durable-p50-µs")
		b.ReportMetric(float64(baseline.Median(fsync).Microseconds()), "fsync-p50-µs")
		b.ReportMetric(float64(baseline.Median(res).Microseconds()), "resume-p50-µs")
		b.ReportMetric(float64(baseline.Median(static).Microseconds()), "static-p50-µs")
		b.ReportMetric(float64(baseline.Median(idle).Microseconds()), "idle-static-p50-µs")
	}
	b.StopTimer()
	b.ReportMetric(baseline.Median(ackR), "ack-vs-durable")
	b.ReportMetric(baseline.Median(resumeR), "resume-ratio")
	b.ReportMetric(baseline.Median(idleR), "resume-vs-idle-static")
	b.ReportMetric(baseline.Median(groupR), "vs-group-commit")
	b.ReportMetric(float64(len(exchange(b, dc, "GET", resume+"&peek=1", nil))), "resume-bytes")
}
