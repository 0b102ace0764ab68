package main

// Benchmarks of the agent-facing commands, beside their floors in the same
// run (docs/PERFORMANCE.md):
//
//	go test -run '^$' -bench . -benchtime 200x ./cmd/continuityd/

import (
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkHookWallTime: `continuityd hook` with the daemon up, against
// starting /bin/true (the floor of any hook command) in the same run.
func BenchmarkHookWallTime(b *testing.B) {
	w := newWorkspace(&testing.T{})
	defer os.RemoveAll(w.dir)
	t := &testing.T{}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.kill()
	payload := `{"session_id":"s","transcript_path":"/t.jsonl","cwd":"` + w.dir + `","hook_event_name":"UserPromptSubmit","prompt":"go on"}`
	env := append(os.Environ(), "CONTINUITYD_SOCKET="+w.socket)
	var hookT, trueT []time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(binary, "hook")
		cmd.Env, cmd.Stdin = env, strings.NewReader(payload)
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		hookT = append(hookT, time.Since(t0))
		t0 = time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		trueT = append(trueT, time.Since(t0))
	}
	b.ReportMetric(ms(p50(hookT)), "hook-p50-ms")
	b.ReportMetric(ms(p50(trueT)), "true-p50-ms")
	b.ReportMetric(float64(p50(hookT))/float64(p50(trueT)), "ratio")
}

// BenchmarkMCPStartupAndResume: `continuityd mcp` from exec to the first
// tool answer, then the resume tool's round trip against GET
// /v1/continuity over the socket.
func BenchmarkMCPStartupAndResume(b *testing.B) {
	w := newWorkspace(&testing.T{})
	defer os.RemoveAll(w.dir)
	p := startProc(&testing.T{}, w.socket, nil, "run", "--config", w.config)
	defer p.kill()
	c := p.client()
	defer c.CloseIdleConnections()
	post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "measure the MCP server"})
	ctx := context.Background()
	var startup []time.Duration
	for i := 0; i < 5; i++ {
		cmd := exec.Command(binary, "mcp")
		cmd.Env = append(os.Environ(), "CONTINUITYD_SOCKET="+w.socket)
		t0 := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"peek": true}}); err != nil {
			b.Fatal(err)
		}
		startup = append(startup, time.Since(t0))
		cs.Close()
	}
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "CONTINUITYD_SOCKET="+w.socket)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	var viaMCP, viaHTTP []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"peek": true}}); err != nil {
			b.Fatal(err)
		}
		viaMCP = append(viaMCP, time.Since(t0))
		t0 = time.Now()
		resp, err := c.Get("http://d/v1/continuity?peek=1")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		viaHTTP = append(viaHTTP, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(ms(p50(startup)), "startup-to-first-answer-ms")
	b.ReportMetric(ms(p50(viaMCP)), "mcp-resume-p50-ms")
	b.ReportMetric(ms(p50(viaHTTP)), "http-resume-p50-ms")
	b.ReportMetric(float64(p50(viaMCP))/float64(p50(viaHTTP)), "ratio")
}
