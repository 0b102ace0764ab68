package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/timerslack"
)

// TestMain runs the package's tests and benchmarks with the timer slack
// the daemon gives itself by default (cmd run): the benchmarks measure
// the daemon as it runs.
func TestMain(m *testing.M) {
	if err := timerslack.Ensure(config.DefaultTimerSlack); err != nil {
		fmt.Fprintln(os.Stderr, "daemon tests: running with the system's timer slack:", err)
	}
	agent.CheckViews() // a resume's kept view that a change did not replace fails the test that made it
	goleak.VerifyTestMain(m)
}

// testDaemon is a real daemon on a real Unix socket in a temp directory.
type testDaemon struct {
	t      testing.TB
	cfg    *config.Config
	d      *Daemon
	http   *http.Client
	cancel context.CancelFunc
	done   chan error
}

// shortTempDir returns a temp dir short enough for a socket path (t.TempDir
// paths can pass the 107-byte sun_path limit).
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func testConfig(t testing.TB, agents ...string) *config.Config {
	dir := shortTempDir(t)
	if len(agents) == 0 {
		agents = []string{"builder"}
	}
	cfg := &config.Config{
		Daemon: config.Daemon{
			StateDir:        filepath.Join(dir, "state"),
			Socket:          filepath.Join(dir, "d.sock"),
			SocketMode:      "0600",
			ShutdownTimeout: config.Duration{Duration: 5 * time.Second},
		},
		Outbox: config.Outbox{
			MaxPending:        1000,
			MinBackoff:        config.Duration{Duration: 10 * time.Millisecond},
			MaxBackoff:        config.Duration{Duration: 200 * time.Millisecond},
			MaxRetryAfter:     config.Duration{Duration: 5 * time.Second},
			UnauthorizedRetry: config.Duration{Duration: 500 * time.Millisecond},
			ResumeTimeout:     config.Duration{Duration: time.Second},
		},
	}
	for _, a := range agents {
		cfg.Agents = append(cfg.Agents, config.Agent{Name: a, Workdir: dir, Upstreams: []string{"local"}})
	}
	return cfg
}

// startDaemon runs a daemon until the test ends.
func startDaemon(t testing.TB, cfg *config.Config) *testDaemon {
	t.Helper()
	return startDaemonWith(t, cfg, Options{Version: "test"})
}

// startDaemonWith runs a daemon with the given options until the test ends.
func startDaemonWith(t testing.TB, cfg *config.Config, opts Options) *testDaemon {
	t.Helper()
	ready := make(chan struct{})
	opts.Ready = func() { close(ready) }
	d, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{t: t, cfg: cfg, d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	select {
	case <-ready:
	case err := <-td.done:
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not become ready")
	}
	td.http = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dd net.Dialer
			return dd.DialContext(ctx, "unix", cfg.Daemon.Socket)
		},
	}}
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	if td.cancel == nil {
		return
	}
	td.cancel()
	td.cancel = nil
	td.http.CloseIdleConnections()
	select {
	case err := <-td.done:
		if err != nil {
			td.t.Errorf("daemon Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		td.t.Error("daemon did not stop")
	}
}

// do sends a request and returns the status and decoded JSON body.
func (td *testDaemon) do(method, path string, body any) (int, map[string]any) {
	td.t.Helper()
	status, raw := td.doRaw(method, path, body)
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			td.t.Fatalf("%s %s: answer is not JSON: %q", method, path, raw)
		}
	}
	return status, m
}

func (td *testDaemon) doRaw(method, path string, body any) (int, []byte) {
	td.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			td.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://continuityd"+path, rd)
	if err != nil {
		td.t.Fatal(err)
	}
	resp, err := td.http.Do(req)
	if err != nil {
		td.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// errCode returns the error code of an error answer.
func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errField(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["field"].(string)
	return c
}

// expectError asserts a refusal with the given status and code.
func (td *testDaemon) expectError(method, path string, body any, status int, code string) map[string]any {
	td.t.Helper()
	got, m := td.do(method, path, body)
	if got != status || errCode(m) != code {
		td.t.Fatalf("%s %s: got %d %v, want %d %s", method, path, got, m, status, code)
	}
	if e, _ := m["error"].(map[string]any); e["message"] == "" {
		td.t.Fatalf("%s %s: error without a message: %v", method, path, m)
	}
	return m
}

// expectOK asserts a 200 and returns the body.
func (td *testDaemon) expectOK(method, path string, body any) map[string]any {
	td.t.Helper()
	got, m := td.do(method, path, body)
	if got != http.StatusOK {
		td.t.Fatalf("%s %s: got %d %v, want 200", method, path, got, m)
	}
	return m
}

// resume reads the resume document (peek: without resetting).
func (td *testDaemon) resume(query string) map[string]any {
	td.t.Helper()
	return td.expectOK("GET", "/v1/continuity"+query, nil)
}
