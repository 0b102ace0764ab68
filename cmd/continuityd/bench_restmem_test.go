//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/sourcetree"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// BenchmarkRestingMemory (issue 23: resting memory, one agent, ≤ 25 MiB):
// `continuityd run` (the front, which becomes continuityd-daemon in the
// same process, its timer slack given) on the embedded default in a 200-file git
// project, left alone for 15 s once it answers /healthz and its start
// snapshot is listed, then its memory read from /proc/PID/status and
// /proc/PID/smaps_rollup (kB → MiB), and its Go heap from /metrics. Two
// starts on the same state: "fresh" (no state yet) and "restart" (the
// state the first start left: its log, its snapshot store), the way a
// daemon runs on a machine most of the time. HOME, the XDG directories,
// the state directory and the socket are all in a temporary directory.
// Extra variables for the daemon (GODEBUG=gctrace=1, GOGC, GOMEMLIMIT)
// pass through from the environment; its log is kept with
// CONTINUITYD_BENCH_LOG=FILE. The daemon measured is the one TestMain
// builds (go build's defaults, as go install), or
// CONTINUITYD_BENCH_DAEMON=PATH, started itself (a release build:
// CGO_ENABLED=0, -trimpath -ldflags="-s -w", as .goreleaser.yaml). It takes about 40 s
// a run and is not run by the tests; docs/PERFORMANCE.md ("Resting
// memory") quotes runs:
//
//	go test -run '^$' -bench RestingMemory -benchtime 1x -count 2 ./cmd/continuityd/
func BenchmarkRestingMemory(b *testing.B) {
	program := binary // the front; it finds continuityd-daemon beside it
	if other := os.Getenv("CONTINUITYD_BENCH_DAEMON"); other != "" {
		program = other // another build: the release's flags, an earlier commit
	}
	for i := 0; i < b.N; i++ {
		top := b.TempDir()
		project := filepath.Join(top, "project")
		restingProject(b, project, 200)
		home, run := filepath.Join(top, "home"), filepath.Join(top, "run")
		for _, d := range []string{home, run} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				b.Fatal(err)
			}
		}
		socket := filepath.Join(run, "d.sock")
		env := append(os.Environ(),
			"HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "XDG_RUNTIME_DIR="+run,
			// As root the daemon ignores the XDG directories; these move
			// the embedded default's state and socket for anyone.
			"CONTINUITYD_STATE_DIR="+filepath.Join(top, "state"), "CONTINUITYD_SOCKET="+socket,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		for _, start := range []string{"fresh", "restart"} {
			m := restingDaemon(b, program, project, socket, env)
			for _, k := range []string{"VmRSS", "RssAnon", "RssFile", "Pss", "Private_Dirty", "Shared_Clean", "heap_inuse", "heap_alloc", "stack_inuse", "heap_released"} {
				b.ReportMetric(m[k], start+"-"+k+"-MiB")
			}
		}
	}
}

// restingProject writes files files of about 600 bytes of source-like
// text, in directories of 100, and commits them in a new git repository.
func restingProject(b *testing.B, dir string, files int) {
	b.Helper()
	sourcetree.Write(b, dir, files, 600)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "start"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
			"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// restingDaemon starts the daemon in project, waits for its start
// snapshot, leaves it alone for 15 s, reads its memory (MiB, by name) and
// stops it with SIGTERM.
func restingDaemon(b *testing.B, program, project, socket string, env []string) map[string]float64 {
	b.Helper()
	var stderr syncBuffer
	cmd := exec.Command(program, "run")
	cmd.Dir, cmd.Env, cmd.Stderr = project, env, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-exited
			b.Errorf("the daemon did not stop on SIGTERM: %s", &stderr)
		}
		if name := os.Getenv("CONTINUITYD_BENCH_LOG"); name != "" {
			f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				f.WriteString(stderr.String())
				f.Close()
			}
		}
	}()
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer c.CloseIdleConnections()
	body := func(path string) ([]byte, bool) {
		resp, err := c.Get("http://d" + path)
		if err != nil {
			return nil, false
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		return buf.Bytes(), err == nil && resp.StatusCode == http.StatusOK
	}
	testwait.Until(b, func() string { return "the daemon's start snapshot; its log: " + stderr.String() }, func() bool {
		select {
		case <-exited:
			b.Fatalf("the daemon exited: %s", &stderr)
		default:
		}
		if _, ok := body("/healthz"); !ok {
			return false
		}
		raw, ok := body("/v1/snapshots")
		var list struct{ Snapshots []json.RawMessage }
		return ok && json.Unmarshal(raw, &list) == nil && len(list.Snapshots) > 0
	})
	c.CloseIdleConnections()     // an open connection is not resting
	time.Sleep(15 * time.Second) // benchmark only: what is measured is the daemon left alone this long

	pid := cmd.Process.Pid
	m := map[string]float64{}
	for _, file := range []string{"status", "smaps_rollup"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			b.Skipf("no /proc here: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			name, rest, ok := strings.Cut(sc.Text(), ":")
			fields := strings.Fields(rest)
			if !ok || len(fields) != 2 || fields[1] != "kB" {
				continue
			}
			if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
				m[name] = kb / 1024
			}
		}
	}
	// The Go runtime's own view, read after /proc (this request allocates).
	raw, _ := body("/metrics")
	for _, line := range strings.Split(string(raw), "\n") {
		for _, k := range []string{"heap_inuse", "heap_alloc", "stack_inuse", "heap_released", "heap_idle", "sys"} {
			if v, ok := strings.CutPrefix(line, "go_memstats_"+k+"_bytes "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				m[k] = f / (1 << 20)
			}
		}
	}
	b.Logf("pid %d: VmRSS %.1f (anon %.1f, file %.1f) MiB; smaps_rollup Pss %.1f, Private_Dirty %.1f, Shared_Clean %.1f; Go heap in use %.1f, live %.1f, released %.1f, stacks %.1f, sys %.1f MiB",
		pid, m["VmRSS"], m["RssAnon"], m["RssFile"], m["Pss"], m["Private_Dirty"], m["Shared_Clean"], m["heap_inuse"], m["heap_alloc"], m["heap_released"], m["stack_inuse"], m["sys"])
	return m
}
