package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/upstream/local"
)

// binary is the continuityd binary built once for the end-to-end tests:
// they run the real program as a subprocess and kill it with SIGKILL.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cdbin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "continuityd")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building continuityd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a daemon subprocess.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	socket string
	stderr *syncBuffer
	exited chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workspace is a temp dir with a config for one agent.
type workspace struct {
	dir, config, socket, state string
}

func newWorkspace(t *testing.T) *workspace {
	dir, err := os.MkdirTemp("", "cde2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &workspace{dir: dir, config: filepath.Join(dir, "continuityd.toml"),
		socket: filepath.Join(dir, "d.sock"), state: filepath.Join(dir, "state")}
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n", w.state, w.socket, dir)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

func startProc(t *testing.T, socket string, env []string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", socket, env, args...)
}

// startProcIn starts the daemon with dir as its working directory.
func startProcIn(t *testing.T, dir, socket string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, socket: socket, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			// The socket accepts; make sure it is this process answering.
			if p.healthy() {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("daemon exited early: %s", p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not come up: %s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.socket)
		},
	}}
}

func (p *proc) healthy() bool {
	c := p.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://d/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

func (p *proc) terminate(t *testing.T) int {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop on SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

func post(c *http.Client, path string, body any) (int, map[string]any, error) {
	raw, _ := json.Marshal(body)
	resp, err := c.Post("http://d"+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, nil
}

func get(t *testing.T, c *http.Client, path string) map[string]any {
	t.Helper()
	resp, err := c.Get("http://d" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCrashKeepsEveryAcknowledgedWrite: writes answered 200, then SIGKILL
// while writers are still going; after a restart every acknowledged write
// is in the resume and in the local archive.
func TestCrashKeepsEveryAcknowledgedWrite(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()

	const writers = 4
	var mu sync.Mutex
	acked := map[string]float64{} // focus → seq
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				focus := fmt.Sprintf("writer %d write %d", g, i)
				status, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{
					"focus":  focus,
					"decide": map[string]any{"chosen": focus, "because": "every write must survive a kill -9 right after its 200"},
				})
				if err != nil {
					return // the daemon died under us: this write was not acknowledged
				}
				if status != 200 {
					t.Errorf("write %s: %d %v", focus, status, m)
					return
				}
				mu.Lock()
				acked[focus] = m["seq"].(float64)
				mu.Unlock()
			}
		}()
	}
	// Let some hundreds of writes land, then kill mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 300 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.kill()
	close(stop)
	wg.Wait()
	c.CloseIdleConnections()
	if len(acked) < 100 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acked))
	}

	// The killed daemon left its socket file behind; the new one replaces it.
	if _, err := os.Lstat(w.socket); err != nil {
		t.Logf("socket file gone after SIGKILL (%v); fine either way", err)
	}
	p2 := startProc(t, w.socket, nil, "run", "--config", w.config)
	c2 := p2.client()
	defer c2.CloseIdleConnections()
	r := get(t, c2, "/v1/continuity?peek=1")
	var maxSeq float64
	for _, s := range acked {
		maxSeq = max(maxSeq, s)
	}
	if r["seq"].(float64) < maxSeq {
		t.Fatalf("resume seq %v < highest acknowledged %v", r["seq"], maxSeq)
	}
	// The archive (local upstream) catches up from the durable log.
	agentDir := filepath.Join(w.state, "agents", "builder")
	var archived map[string]uint64
	deadline = time.Now().Add(30 * time.Second)
	for {
		ws, _ := local.ReadAll(agentDir)
		archived = map[string]uint64{}
		for _, wr := range ws {
			if wr.Checkpoint != nil && wr.Checkpoint.Focus != nil {
				archived[*wr.Checkpoint.Focus] = wr.Seq
			}
		}
		missing := 0
		for f := range acked {
			if _, ok := archived[f]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged writes missing from the archive", missing, len(acked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for f, seq := range acked {
		if archived[f] != uint64(seq) {
			t.Fatalf("%s archived as seq %d, acknowledged as %v", f, archived[f], seq)
		}
	}
	if code := p2.terminate(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d: %s", code, p2.stderr)
	}
}

// TestRunEmbeddedDefault: `continuityd run` with no config in some
// directory serves agent "default" on that directory with the local
// upstream, logs its socket, and stops cleanly on SIGTERM.
func TestRunEmbeddedDefault(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cddef")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "run", "continuityd.sock")
	env := []string{"CONTINUITYD_STATE_DIR=" + filepath.Join(dir, "state"), "CONTINUITYD_SOCKET=" + sock}
	// Started from the work directory, as a person would.
	p := startProcIn(t, dir, sock, env, "run")
	c := p.client()
	defer c.CloseIdleConnections()
	st := get(t, c, "/v1/status")
	agents := st["agents"].([]any)
	a := agents[0].(map[string]any)
	if len(agents) != 1 || a["name"] != "default" || a["workdir"] != dir {
		t.Fatalf("embedded default agents: %v", agents)
	}
	if ups := a["upstreams"].([]any); len(ups) != 1 || ups[0].(map[string]any)["name"] != "local" {
		t.Fatalf("embedded default upstreams: %v", ups)
	}
	if !strings.Contains(p.stderr.String(), sock) {
		t.Fatalf("the socket path is not logged: %s", p.stderr)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after a clean stop: %v", err)
	}
}
