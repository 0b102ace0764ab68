package daemon

// Benchmarks that put continuityd's numbers beside the physical baseline in
// the same run, as docs/PERFORMANCE.md quotes them:
//
//	go test -run '^$' -bench . -benchtime 2000x -count 1 ./daemon/
//
// Each reports medians (p50) of both sides and their ratio as custom
// metrics; ns/op is the mean of the whole loop and is not the figure to read.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/baseline"
)

var benchBody = []byte(`{"focus":"ship the parser fix","working_state":{"next_action":"run the fuzzers","last_result":"tests green on linux"},"decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute"}}`)

func benchClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func postCheckpoint(b *testing.B, c *http.Client) {
	resp, err := c.Post("http://d/v1/continuity/checkpoint", "application/json", bytes.NewReader(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	drainOK(b, resp)
}

// drainOK reads the whole answer and fails the benchmark on anything but
// 200: a benchmark that measured refusals would be meaningless.
func drainOK(b *testing.B, resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkDurableAck (a): a checkpoint acknowledged over the socket (on
// disk when answered) against a raw append+fsync of the same bytes in the
// same directory, interleaved so all see the same disk. The ack is timed
// twice per round, with two clients: a bare HTTP/1.1 exchange on one
// connection (the daemon's cost, as curl in a hook sees it; the headline)
// and net/http's Client (which adds its own goroutine hand-offs).
func BenchmarkDurableAck(b *testing.B) {
	cfg := testConfig(b)
	cfg.Outbox.MaxPending = 1 << 20
	if os.Getenv("BENCH_NO_UPSTREAM") != "" {
		cfg.Agents[0].Upstreams = nil
	}
	td := startDaemon(b, cfg)
	defer td.stop()
	c := benchClient(cfg.Daemon.Socket)
	defer c.CloseIdleConnections()
	bc := newBareClient(b, cfg.Daemon.Socket)
	defer bc.close()
	raw, err := os.OpenFile(filepath.Join(cfg.Daemon.StateDir, "raw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	postCheckpoint(b, c) // warm the connections
	bc.post(b, "/v1/continuity/checkpoint", benchBody)
	ack := make([]time.Duration, 0, b.N)
	httpAck := make([]time.Duration, 0, b.N)
	fs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		bc.post(b, "/v1/continuity/checkpoint", benchBody)
		ack = append(ack, time.Since(t0))
		t0 = time.Now()
		if _, err := raw.Write(benchBody); err != nil {
			b.Fatal(err)
		}
		if err := raw.Sync(); err != nil {
			b.Fatal(err)
		}
		fs = append(fs, time.Since(t0))
		t0 = time.Now()
		postCheckpoint(b, c)
		httpAck = append(httpAck, time.Since(t0))
	}
	b.StopTimer()
	ma, mh, mf := baseline.Median(ack), baseline.Median(httpAck), baseline.Median(fs)
	b.ReportMetric(float64(ma.Microseconds()), "ack-p50-µs")
	b.ReportMetric(float64(mh.Microseconds()), "httpclient-ack-p50-µs")
	b.ReportMetric(float64(mf.Microseconds()), "fsync-p50-µs")
	b.ReportMetric(float64(ma)/float64(mf), "ratio")
	b.ReportMetric(float64(mh)/float64(mf), "httpclient-ratio")
}

// BenchmarkResume (b): GET /v1/continuity over the socket against a static
// handler serving the same bytes on the same kind of socket, after 20
// checkpoints (a 3.6 KB document).
func BenchmarkResume(b *testing.B) { benchResume(b, 20) }

// BenchmarkResumeSmall is (b) after one checkpoint (a document of about
// 1 KB, as issue 23 measured it): the answer's own bytes count for less,
// the daemon's fixed cost per request for more.
func BenchmarkResumeSmall(b *testing.B) { benchResume(b, 1) }

func benchResume(b *testing.B, checkpoints int) {
	cfg := testConfig(b)
	td := startDaemon(b, cfg)
	defer td.stop()
	c := benchClient(cfg.Daemon.Socket)
	defer c.CloseIdleConnections()
	for i := 0; i < checkpoints; i++ {
		postCheckpoint(b, c)
	}
	fetch := func(c *http.Client, path string) []byte {
		resp, err := c.Get("http://d" + path)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return body
	}
	doc := fetch(c, "/v1/continuity?peek=1")

	staticSock := filepath.Join(filepath.Dir(cfg.Daemon.Socket), "static.sock")
	ln, err := net.Listen("unix", staticSock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	sc := benchClient(staticSock)
	defer sc.CloseIdleConnections()
	fetch(sc, "/")

	res := make([]time.Duration, 0, b.N)
	st := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		fetch(c, "/v1/continuity")
		res = append(res, time.Since(t0))
		t0 = time.Now()
		fetch(sc, "/")
		st = append(st, time.Since(t0))
	}
	b.StopTimer()
	mr, ms := baseline.Median(res), baseline.Median(st)
	b.ReportMetric(float64(mr.Microseconds()), "resume-p50-µs")
	b.ReportMetric(float64(ms.Microseconds()), "static-p50-µs")
	b.ReportMetric(float64(mr)/float64(ms), "ratio")
	b.ReportMetric(float64(len(doc)), "doc-bytes")
}

// BenchmarkConcurrentWriters (c): the write throughput of 16 writers
// against one, each on its own connection with a bare client, beside the
// same measurement of a bare group commit (groupCommitServer: an HTTP
// handler that only appends and fdatasyncs) on the same kind of socket in
// the same directory: what this machine allows any group commit. The two
// are interleaved in rounds (one writer then 16, ours then the baseline)
// so that both see the same disk; every figure is the median over the
// rounds, ratios taken within a round.
//
// For the 16-writer phases it also reports the commits' average size (ours
// and the baseline's), how busy our committer was, the process's CPU time
// per write (client included; ours and the baseline's) and the cores ours
// kept busy.
func BenchmarkConcurrentWriters(b *testing.B) {
	cfg := testConfig(b)
	cfg.Outbox.MaxPending = 1 << 20 // measure the store, not the archive's bound
	if os.Getenv("BENCH_NO_UPSTREAM") != "" {
		cfg.Agents[0].Upstreams = nil
	}
	td := startDaemon(b, cfg)
	defer td.stop()
	status, answer := td.doRaw("POST", "/v1/continuity/checkpoint", benchBody)
	if status != 200 {
		b.Fatalf("status %d: %s", status, answer)
	}
	base := startGroupCommitServer(b, cfg.Daemon.StateDir, len(answer))
	defer base.stop()
	store := td.d.snap().agents["builder"].Store()

	// dial opens the writers' connections, each warmed by one request, so
	// that a phase times (and counts the commits of) its own writes only.
	dial := func(sock string, writers int) []*bareClient {
		clients := make([]*bareClient, writers)
		for w := range clients {
			clients[w] = newBareClient(b, sock)
			clients[w].post(b, "/v1/continuity/checkpoint", benchBody)
		}
		return clients
	}
	run := func(clients []*bareClient, total int) (perSecond float64, cpu, wall time.Duration) {
		defer func() {
			for _, c := range clients {
				c.close()
			}
		}()
		var wg sync.WaitGroup
		per := total / len(clients)
		cpu0, t0 := baseline.ProcessCPU(), time.Now()
		for _, c := range clients {
			wg.Go(func() {
				for range per {
					c.post(b, "/v1/continuity/checkpoint", benchBody)
				}
			})
		}
		wg.Wait()
		wall = time.Since(t0)
		return float64(per*len(clients)) / wall.Seconds(), baseline.ProcessCPU() - cpu0, wall
	}

	// Five rounds, and 16-writer phases of four times the writes (a
	// single writer's phase lasts about as long): on a shared machine a
	// phase of a fifth of a second swings with its neighbours.
	const rounds, many = 5, 4
	n := max(b.N, 160)
	var r baseline.Rounds
	var cpu, wall, busy, baseCPU time.Duration
	b.ResetTimer()
	for range rounds {
		o, _, _ := run(dial(cfg.Daemon.Socket, 1), n)
		bo, _, _ := run(dial(base.sock, 1), n)
		ours := dial(cfg.Daemon.Socket, 16)
		cs0 := store.CommitStats()
		s, c, w := run(ours, many*n)
		cs1 := store.CommitStats()
		bare := dial(base.sock, 16)
		gc0, gw0 := base.gc.Counts()
		bs, bc, _ := run(bare, many*n)
		gc1, gw1 := base.gc.Counts()
		r.Add(o, s, bo, bs)
		r.AddCommits(int64(cs1.Commits-cs0.Commits), int64(cs1.Writes-cs0.Writes), gc1-gc0, gw1-gw0)
		cpu, wall, busy, baseCPU = cpu+c, wall+w, busy+cs1.Busy-cs0.Busy, baseCPU+bc
	}
	b.StopTimer()
	r.Report(b)
	b.ReportMetric(busy.Seconds()/wall.Seconds(), "16-writers-committer-busy")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(rounds*many*n), "16-writers-cpu-µs/write")
		b.ReportMetric(float64(baseCPU.Microseconds())/float64(rounds*many*n), "groupcommit-16-writers-cpu-µs/write")
		b.ReportMetric(cpu.Seconds()/wall.Seconds(), "16-writers-cores-busy")
		b.ReportMetric(float64(rawFsyncCPU(b, cfg.Daemon.StateDir).Nanoseconds())/1e3, "raw-fsync-cpu-µs")
	}
}

// rawFsyncCPU is the CPU time one raw append+fsync costs the process on
// this machine (on a virtual machine the guest can spend much of the
// fsync's wait on a CPU), measured with the daemon idle.
func rawFsyncCPU(b *testing.B, dir string) time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "fsync-cpu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const n = 300
	cpu0 := baseline.ProcessCPU()
	for i := 0; i < n; i++ {
		f.Write(benchBody)
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return (baseline.ProcessCPU() - cpu0) / n
}

// ensure the benchmark body is what the API accepts (a bench that measured
// refusals would be meaningless).
func TestBenchBodyIsAccepted(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(benchBody, &m); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, testConfig(t))
	if s, body := td.doRaw("POST", "/v1/continuity/checkpoint", benchBody); s != 200 {
		t.Fatal(fmt.Sprint(s, string(body)))
	}
}

// bareClient is one keep-alive HTTP/1.1 connection driven from the calling
// goroutine: it writes the request and parses the answer with net/http's
// own reader. net/http's Client runs a read and a write goroutine per
// connection and hands every request across them, which is the harness's
// cost, not the daemon's; a hook's curl has none of it.
type bareClient struct {
	conn net.Conn
	rd   *bufio.Reader
}

func newBareClient(b *testing.B, sock string) *bareClient {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	return &bareClient{conn: conn, rd: bufio.NewReader(conn)}
}

func (c *bareClient) close() { c.conn.Close() }

// post sends one request and reads the whole answer; anything but 200 fails
// the benchmark.
func (c *bareClient) post(b *testing.B, path string, body []byte) {
	req := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	if _, err := c.conn.Write(req); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		b.Fatal(err)
	}
	drainOK(b, resp)
}
