//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchUntil waits for cond up to half an hour (a 100,000-file tree on a
// loaded machine takes minutes), failing with what.
func benchUntil(b testing.TB, what func() string, cond func() bool) {
	b.Helper()
	for deadline := time.Now().Add(30 * time.Minute); !cond(); {
		if time.Now().After(deadline) {
			b.Fatalf("waited 30m: %s", what())
		}
		time.Sleep(50 * time.Millisecond) // benchmark only: polling what the daemon does at its own pace
	}
}

// benchInt is the environment variable name as a number, else def.
func benchInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// placesBench is one daemon of the places benchmarks: its home, config,
// socket, and a client of it.
type placesBench struct {
	b                  *testing.B
	top, home, config  string
	socket             string
	env                []string
	cmd                *exec.Cmd
	stderr             *syncBuffer
	exited             chan struct{}
	c                  *http.Client
	started, listening time.Time
}

func newPlacesBench(b *testing.B, extraConfig string, extraEnv ...string) *placesBench {
	top := b.TempDir()
	pb := &placesBench{b: b, top: top, home: filepath.Join(top, "home"), socket: filepath.Join(top, "d.sock"), config: filepath.Join(top, "continuityd.toml")}
	if err := os.MkdirAll(pb.home, 0o700); err != nil {
		b.Fatal(err)
	}
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\n\n[places]\nroots = [%q]\n%s", filepath.Join(top, "state"), pb.socket, pb.home, extraConfig)
	if err := os.WriteFile(pb.config, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	pb.env = append(os.Environ(), append([]string{"HOME=" + pb.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"CONTINUITYD_SOCKET=" + pb.socket}, extraEnv...)...)
	pb.c = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", pb.socket)
		},
	}}
	return pb
}

// start runs the daemon (in the home, which is no place: it serves
// places only) and waits until it answers.
func (pb *placesBench) start() {
	pb.stderr, pb.exited = &syncBuffer{}, make(chan struct{})
	pb.cmd = exec.Command(binary, "run", "--config", pb.config)
	pb.cmd.Dir, pb.cmd.Env, pb.cmd.Stderr = pb.home, pb.env, pb.stderr
	pb.started = time.Now()
	if err := pb.cmd.Start(); err != nil {
		pb.b.Fatal(err)
	}
	go func() { pb.cmd.Wait(); close(pb.exited) }()
	pb.b.Cleanup(pb.stop)
	benchUntil(pb.b, func() string { return "the daemon answers: " + pb.stderr.String() }, func() bool {
		resp, err := pb.c.Get("http://d/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	pb.listening = time.Now()
}

func (pb *placesBench) stop() {
	select {
	case <-pb.exited:
		return
	default:
	}
	pb.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pb.exited:
	case <-time.After(60 * time.Second):
		pb.cmd.Process.Kill()
		<-pb.exited
	}
}

// session sends a SessionStart from dir through the hook command, as an
// agent does, and returns how long the hook took and what it printed.
func (pb *placesBench) session(dir string) (time.Duration, string) {
	payload := fmt.Sprintf(`{"session_id":"s-%d","cwd":%q,"hook_event_name":"SessionStart","source":"startup"}`, time.Now().UnixNano(), dir)
	cmd := exec.Command(binary, "hook")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, pb.env, strings.NewReader(payload)
	began := time.Now()
	out, err := cmd.Output()
	took := time.Since(began)
	if err != nil {
		pb.b.Fatalf("hook in %s: %v", dir, err)
	}
	return took, string(out)
}

// status is GET /v1/status.
func (pb *placesBench) status() map[string]any {
	resp, err := pb.c.Get("http://d/v1/status")
	if err != nil {
		pb.b.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// healthy reports whether n places are watched, each agent's parts ok
// (or off) and its start snapshot taken.
func (pb *placesBench) healthy(n int) bool {
	st := pb.status()
	agents := asList(st["agents"])
	if len(agents) != n {
		return false
	}
	for _, a := range agents {
		for _, comp := range asList(a.(map[string]any)["components"]) {
			cm := comp.(map[string]any)
			if s := cm["state"]; s != "ok" && s != "off" || strings.Contains(fmt.Sprint(cm["detail"]), "start snapshot") {
				return false
			}
		}
		name := a.(map[string]any)["name"].(string)
		resp, err := pb.c.Get("http://d/v1/snapshots?agent=" + url.QueryEscape(name))
		if err != nil {
			return false
		}
		var list struct{ Snapshots []json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Snapshots) == 0 {
			return false
		}
	}
	return true
}

// cpuTicks is the daemon's user and system CPU time so far, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// vmRSS is the daemon's resident memory in MiB.
func vmRSS(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

var tookRE = regexp.MustCompile(`start snapshot taken.* took=([0-9.]+[a-zµ]+)`)

// startSnapshotTook is how long each start snapshot in log took, in order.
func startSnapshotTook(log string) []time.Duration {
	var out []time.Duration
	for _, m := range tookRE.FindAllStringSubmatch(log, -1) {
		if d, err := time.ParseDuration(m[1]); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// BenchmarkPlaceAdoptLarge (floors: adopting a 100,000-file project, the
// adopting hook answers within its budget, the start snapshot in the
// background with its progress in status; a session in an unwatched place
// watched again and caught up in ≤ 1.5× the first snapshot's time): the
// hook command's wall time for the adopting SessionStart (its budget is
// 400 ms), then the place left idle (the test hook CONTINUITYD_TEST_IDLE_AFTER,
// 2 s) until unwatched, a file changed, and the next session's catch-up
// snapshot timed against the first. CONTINUITYD_BENCH_FILES changes the
// 100,000.
//
//	go test -run '^$' -bench PlaceAdoptLarge -benchtime 1x ./cmd/continuityd/
func BenchmarkPlaceAdoptLarge(b *testing.B) {
	files := benchInt("CONTINUITYD_BENCH_FILES", 100_000)
	for i := 0; i < b.N; i++ {
		pb := newPlacesBench(b, "", "CONTINUITYD_TEST_IDLE_AFTER=2s", "CONTINUITYD_HOOK_BUDGET=400ms")
		proj := filepath.Join(pb.home, "large")
		restingProject(b, proj, files)
		pb.start()
		hookTook, out := pb.session(proj)
		if !strings.Contains(out, "# Where large was") {
			b.Fatalf("the adopting session's answer: %q\nlog:\n%s", out, pb.stderr)
		}
		progress := ""
		for _, a := range asList(pb.status()["agents"]) {
			for _, comp := range asList(a.(map[string]any)["components"]) {
				if cm := comp.(map[string]any); cm["name"] == "snapshots" {
					progress = fmt.Sprint(cm["detail"])
				}
			}
		}
		benchUntil(b, func() string { return "the start snapshot: " + pb.stderr.String() }, func() bool { return len(startSnapshotTook(pb.stderr.String())) >= 1 })
		benchUntil(b, func() string { return "the place unwatched: " + pb.stderr.String() }, func() bool {
			return strings.Contains(pb.stderr.String(), "idle places unwatched")
		})
		if err := os.WriteFile(filepath.Join(proj, "changed-while-unwatched.txt"), []byte("new\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		pb.session(proj)
		benchUntil(b, func() string { return "the catch-up snapshot: " + pb.stderr.String() }, func() bool { return len(startSnapshotTook(pb.stderr.String())) >= 2 })
		caughtUp := time.Since(began)
		took := startSnapshotTook(pb.stderr.String())
		b.ReportMetric(float64(hookTook.Milliseconds()), "adopting-hook-ms")
		b.ReportMetric(took[0].Seconds(), "first-snapshot-s")
		b.ReportMetric(caughtUp.Seconds(), "rewatch-caught-up-s")
		b.ReportMetric(caughtUp.Seconds()/took[0].Seconds(), "rewatch/first")
		b.Logf("%d files: adopting hook %s (status then: %q); first snapshot %s; watched again and caught up in %s (%.2f× the first; its snapshot %s)",
			files, hookTook.Round(time.Millisecond), progress, took[0], caughtUp.Round(time.Millisecond), caughtUp.Seconds()/took[0].Seconds(), took[1])
		pb.stop()
	}
}
