package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
	"github.com/continuityd/continuityd/upstream/local"
)

// binary is the continuityd binary built once for the end-to-end tests:
// they run the real program as a subprocess and kill it with SIGKILL.
// continuityd-daemon is built beside it, as `go install ./cmd/...` and the
// packages install them: the daemon-side commands (`continuityd run`) go
// through the front's hand-off as users' do.
var binary string

// children are the other roles the test binary plays as a child process,
// by the environment variable that asks for each (registered by the
// files that use them).
var children = map[string]func() int{}

func TestMain(m *testing.M) {
	if os.Getenv(mcpFloorEnv) != "" {
		mcpFloorMain()
	}
	if os.Getenv(floodEnv) != "" {
		floodMain()
	}
	if os.Getenv(askEnv) != "" {
		askMain()
	}
	for env, run := range children {
		if os.Getenv(env) != "" {
			os.Exit(run())
		}
	}
	dir, err := os.MkdirTemp("", "cdbin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "continuityd")
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// Every resume of the daemons under test checks the view it kept
		// against one read afresh, and panics on a stale one (package
		// agent, CheckViews); the benchmarks measure what users run.
		args = append(args, "-tags", "checkviews")
	}
	build := exec.Command("go", append(args, ".", "../continuityd-daemon")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building continuityd and continuityd-daemon:", err)
		os.Exit(1)
	}
	// The hooks' half-second budget is a promise to agents, measured in
	// benchmarks; here a loaded machine must not turn a slow answer into
	// "continuityd down". Tests of what the budget cuts set their own.
	os.Setenv("CONTINUITYD_HOOK_BUDGET", "60s")
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
	w := tempWorkspace(t, "cde2e")
	w.writeConfig(t, fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n", w.state, w.socket, w.work()))
	return w
}

// tempWorkspace is a fresh directory (removed at the test's end) with the
// paths of a config, a socket and a state directory in it, and the
// agent's work directory: the agent works in a directory of its own, so
// files the tests write beside the config are not its work. The config is
// the caller's to write.
func tempWorkspace(t *testing.T, prefix string) *workspace {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &workspace{dir: dir, config: filepath.Join(dir, "continuityd.toml"),
		socket: filepath.Join(dir, "d.sock"), state: filepath.Join(dir, "state")}
	if err := os.MkdirAll(w.work(), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// work is the agent's work directory.
func (w *workspace) work() string { return filepath.Join(w.dir, "work") }

// writeConfig writes the daemon's config.
func (w *workspace) writeConfig(t *testing.T, cfg string) {
	t.Helper()
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startProc(t *testing.T, socket string, env []string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", socket, env, args...)
}

// startProcIn starts the daemon with dir as its working directory.
func startProcIn(t *testing.T, dir, socket string, env []string, args ...string) *proc {
	t.Helper()
	return startProcWith(t, func(c *exec.Cmd) { c.Dir = dir }, socket, env, args...)
}

// startProcWith starts the daemon after setup has adjusted its command
// (working directory, credentials), and waits until it answers.
func startProcWith(t *testing.T, setup func(*exec.Cmd), socket string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, socket: socket, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	setup(p.cmd)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(60 * time.Second)
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
			t.Fatalf("daemon exited early: %s%s", p.stderr, lockHolders())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not come up: %s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockHolders names the processes that hold a daemon.lock open, for a
// start refused because another daemon is running: which process still
// held the state directory (on Linux; "" elsewhere or when none does).
func lockHolders() string {
	procs, _ := os.ReadDir("/proc")
	var b strings.Builder
	for _, pd := range procs {
		if _, err := strconv.Atoi(pd.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", pd.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", pd.Name(), "fd", fd.Name())); strings.HasSuffix(l, "/daemon.lock") {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", pd.Name(), "cmdline"))
				status, _ := os.ReadFile(filepath.Join("/proc", pd.Name(), "status"))
				var state, ppid string
				for _, line := range strings.Split(string(status), "\n") {
					if v, ok := strings.CutPrefix(line, "State:"); ok {
						state = strings.TrimSpace(v)
					} else if v, ok := strings.CutPrefix(line, "PPid:"); ok {
						ppid = strings.TrimSpace(v)
					}
				}
				fmt.Fprintf(&b, "\n%s is held by pid %s (%s; parent %s, state %s)", l, pd.Name(),
					strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")), ppid, state)
			}
		}
	}
	return b.String()
}

// waitUntil polls cond until it holds, failing with what after 60 s.
func waitUntil(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
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
	case <-time.After(60 * time.Second):
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
	t.Parallel()
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
	// Killed mid-stream, the last writes were only in the write-ahead log:
	// the restart must have replayed them (this is the path under test).
	if !strings.Contains(p2.stderr.String(), "recovered writes") {
		t.Fatalf("the restart replayed nothing from the write-ahead log: %s", p2.stderr)
	}
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
	// One processor more than the runtime would choose (package
	// daemoncmd, spareProcessor), or the GOMAXPROCS the user set.
	want := runtime.GOMAXPROCS(0) + 1
	if env := os.Getenv("GOMAXPROCS"); env != "" {
		want, _ = strconv.Atoi(env)
	}
	resp, err := c.Get("http://continuityd/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if line := fmt.Sprintf("\ngo_sched_gomaxprocs_threads %d\n", want); !strings.Contains(string(metrics), line) {
		t.Errorf("the daemon's processors: want %q in /metrics", strings.TrimSpace(line))
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after a clean stop: %v", err)
	}
}

// TestSIGTERMWithWritesPendingUpstream: the upstream cannot take anything;
// SIGTERM still exits 0 within the shutdown timeout, and the pending writes
// are delivered after the next start.
func TestSIGTERMWithWritesPendingUpstream(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	agentDir := filepath.Join(w.state, "agents", "builder")
	os.MkdirAll(agentDir, 0o700)
	// The archive directory is a file: every delivery fails and is retried.
	blocker := filepath.Join(agentDir, local.ArchiveDir)
	os.WriteFile(blocker, []byte("in the way"), 0o600)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	for i := 0; i < 5; i++ {
		if status, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": fmt.Sprint("pending ", i)}); err != nil || status != 200 {
			t.Fatalf("write %d: %d %v %v", i, status, m, err)
		}
	}
	c.CloseIdleConnections()
	start := time.Now()
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %v with a 5s timeout", took)
	}
	if !strings.Contains(p.stderr.String(), "not yet delivered") {
		t.Fatalf("shutdown did not say writes were pending: %s", p.stderr)
	}
	os.Remove(blocker)
	p2 := startProc(t, w.socket, nil, "run", "--config", w.config)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ws, _ := local.ReadAll(agentDir)
		if len(ws) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart %d of 5 pending writes delivered", len(ws))
		}
		time.Sleep(20 * time.Millisecond)
	}
	p2.terminate(t)
}

// TestSIGHUPReloads: a SIGHUP picks up an agent added to the file.
func TestSIGHUPReloads(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	f, _ := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n[[agent]]\nname = \"reviewer\"\n")
	f.Close()
	p.cmd.Process.Signal(syscall.SIGHUP)
	c := p.client()
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if len(get(t, c, "/v1/status")["agents"].([]any)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not add the agent: %s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A broken file is refused and the daemon keeps serving.
	os.WriteFile(w.config, []byte("[daemon]\nsocket = 7\n"), 0o600)
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.stderr.String(), "config reload refused"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broken file's reload was not refused within 60 s: %s", p.stderr)
		}
	}
	if len(get(t, c, "/v1/status")["agents"].([]any)) != 2 {
		t.Fatalf("bad reload: %s", p.stderr)
	}
}

// hookFixtures are the real hook payloads the hook package tests on.
func hookFixtures(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, dir := range []string{"claude-code", "codex"} {
		files, _ := filepath.Glob(filepath.Join("..", "..", "internal", "hook", "testdata", dir, "*"))
		for _, f := range files {
			if strings.Contains(f, "fasthooks") { // a logger's rewrite, not stdin
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f, ".jsonl") {
				out = append(out, bytes.Split(bytes.TrimSpace(b), []byte("\n"))...)
			} else {
				out = append(out, b)
			}
		}
	}
	if len(out) < 25 {
		t.Fatalf("only %d hook fixtures found", len(out))
	}
	return out
}

// withCwd is a hook or statusline payload (a captured one may wrap it
// in "payload") with its session's directory set to dir.
func withCwd(t *testing.T, payload []byte, dir string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	inner := m
	if p, ok := m["payload"].(map[string]any); ok {
		inner = p
	}
	inner["cwd"] = dir
	if ws, ok := inner["workspace"].(map[string]any); ok {
		ws["current_dir"], ws["project_dir"] = dir, dir
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHookCommandWithDaemonUp feeds every real payload through
// `continuityd hook` and checks the signal the daemon received.
func TestHookCommandWithDaemonUp(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	cursor := get(t, c, "/v1/continuity/wait?max_seconds=1")["cursor"]
	for i, payload := range hookFixtures(t) {
		// Each session runs in the agent's workdir: a hook from another
		// directory gets nothing of it.
		payload = withCwd(t, payload, filepath.Join(w.dir, "work"))
		var probe struct {
			Payload struct {
				Name string `json:"hook_event_name"`
			} `json:"payload"`
			Name string `json:"hook_event_name"`
		}
		json.Unmarshal(payload, &probe)
		name := probe.Name + probe.Payload.Name
		code, out, errs := cli(t, env, string(payload), "hook")
		if code != 0 {
			t.Fatalf("payload %d (%s): exit %d %s", i, name, code, errs)
		}
		wantSignal := map[string]string{"SessionStart": "session", "PreCompact": "compaction", "PostCompact": "compaction",
			"Stop": "session", "SessionEnd": "session", "UserPromptSubmit": "activity", "PostToolUse": "activity", "PreToolUse": "activity"}[name]
		if name == "SessionStart" {
			var o struct {
				H struct {
					Name string `json:"hookEventName"`
					Ctx  string `json:"additionalContext"`
				} `json:"hookSpecificOutput"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil || o.H.Name != "SessionStart" || !strings.Contains(o.H.Ctx, "# Where builder was") {
				t.Fatalf("SessionStart output: %q %v", out, err)
			}
		} else if out != "" {
			t.Fatalf("payload %d (%s) printed %q", i, name, out)
		}
		if wantSignal == "" {
			continue
		}
		ev := get(t, c, fmt.Sprintf("/v1/continuity/wait?max_seconds=5&after=%v", cursor))
		cursor = ev["cursor"]
		// The policy may act on the signal (a compaction seals a capsule):
		// look for the signal itself among what happened.
		var last map[string]any
		for _, e := range ev["events"].([]any) {
			if m := e.(map[string]any); m["kind"] == "signal" {
				last = m
			}
		}
		data, _ := last["data"].(map[string]any)
		if last == nil || data["kind"] != wantSignal || data["via"] != "hook" {
			t.Fatalf("payload %d (%s) became %v, want a %s signal", i, name, ev["events"], wantSignal)
		}
	}
	if n := get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)["compactions"].(float64); n < 1 {
		t.Fatalf("compactions after the compaction hooks: %v", n)
	}
}

// TestHookCommandWithDaemonDown: bounded time, exit 0, the event spooled and
// stored at the next start, SessionStart answered from the resume the
// daemon left on disk.
func TestHookCommandWithDaemonDown(t *testing.T) {
	w := newWorkspace(t)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	pre := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"` + filepath.Join(w.dir, "work") + `","hook_event_name":"PreCompact","trigger":"auto"}`
	start := time.Now()
	code, out, _ := cli(t, env, pre, "hook")
	if code != 0 || out != "" {
		t.Fatalf("daemon down: exit %d out %q", code, out)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("hook took %v with the daemon down", took)
	}
	spooled, _ := filepath.Glob(filepath.Join(w.state, "spool", "*.json"))
	if len(spooled) != 1 {
		t.Fatalf("spool holds %v", spooled)
	}
	// The daemon ingests the spool once it answers.
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	n := 0.0
	var left []string
	waitUntil(t, func() string { return fmt.Sprintf("spooled compaction not stored: %v; spool %v", n, left) }, func() bool {
		n = get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)["compactions"].(float64)
		left, _ = filepath.Glob(filepath.Join(w.state, "spool", "*.json"))
		return n == 1 && len(left) == 0
	})
	post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "the focus the hook must recall"})
	c.CloseIdleConnections()
	p.terminate(t) // leaves the last resume on disk
	// Asked from the agent's workdir: the last resume answers for its own
	// place only (an agent is its place).
	startHook := `{"session_id":"s2","transcript_path":"/tmp/t.jsonl","cwd":"` + filepath.Join(w.dir, "work") + `","hook_event_name":"SessionStart","source":"resume"}`
	code, out, _ = cli(t, env, startHook, "hook")
	if code != 0 || !strings.Contains(out, "the focus the hook must recall") || !strings.Contains(out, "not reachable") {
		t.Fatalf("SessionStart with the daemon down: %d %q", code, out)
	}
	// Garbage on stdin: still exit 0, nothing on stdout.
	if code, out, _ := cli(t, env, "not json", "hook"); code != 0 || out != "" {
		t.Fatalf("garbage: %d %q", code, out)
	}
}

// TestStatuslineCommand: the real statusline payloads forward their usage
// and print one line; with the daemon down it still prints, fast.
func TestStatuslineCommand(t *testing.T) {
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "front", "statusline", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	w := newWorkspace(t)
	// The session runs in the agent's workdir (the capture's is a
	// Windows path, which lies in no place here).
	later := string(withCwd(t, []byte(fixture("statusline-captured-later-render-v2.1.226-windows.json")), filepath.Join(w.dir, "work")))
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	if code, out, _ := cli(t, env, later, "statusline"); code != 0 || !strings.Contains(out, "ctx 22%") || !strings.Contains(out, "continuityd down") {
		t.Fatalf("daemon down: %d %q", code, out)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	code, out, _ := cli(t, env, later, "statusline", "--wrap", "echo my own line")
	if code != 0 || out != "my own line │ ctx 22% · never saved · ok\n" {
		t.Fatalf("statusline: %d %q", code, out)
	}
	ctxState := get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)
	if f := ctxState["used_fraction"].(float64); f < 0.21 || f > 0.23 {
		t.Fatalf("forwarded usage %v, want 0.22", f)
	}
	// A payload without usage (the first render) forwards nothing, and
	// shows the daemon's figure of the session, saying whose it is.
	first := string(withCwd(t, []byte(fixture("statusline-captured-first-render-v2.1.226-windows.json")), filepath.Join(w.dir, "work")))
	if code, out, _ := cli(t, env, first, "statusline"); code != 0 || !strings.HasPrefix(out, "ctx 22% (statusline) · ") {
		t.Fatalf("first render: %d %q", code, out)
	}
}
