package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openCount is how many of pid's file descriptors are open on path.
func openCount(t *testing.T, pid int, path string) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("list the daemon's open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestSIGHUPDuringStartUp: a daemon sent SIGHUP in a tight loop from the
// moment its process starts until it answers (a service manager's reload
// right after start, a config watch firing) comes up with one set of
// agents, each residency open once, serves the reloads it took after
// start, and never panics. Before reloads were requests served by the run
// loop, an early SIGHUP built agents beside the ones Run was building, or
// started them with a nil context (a panic).
//
// The daemon inherits SIGHUP ignored (as under nohup): a SIGHUP before the
// program installs its handler would otherwise kill it, the default action
// and not what this test is about. Go keeps an inherited ignored SIGHUP
// ignored until the daemon asks for it (signal.Notify); from then on every
// SIGHUP of the loop reaches the daemon. The test process ignores SIGHUP
// while it starts the daemons (nothing else in it expects one).
func TestSIGHUPDuringStartUp(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to count open files")
	}
	w := newWorkspace(t)
	second := filepath.Join(w.dir, "review")
	os.MkdirAll(second, 0o755)
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[[agent]]\nname = \"reviewer\"\nworkdir = %q\n", second)
	f.Close()
	agents := []string{"builder", "reviewer"}
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)

	const rounds = 15
	for round := range rounds {
		p := &proc{t: t, socket: w.socket, stderr: &syncBuffer{}, exited: make(chan struct{})}
		p.cmd = exec.Command(binary, "run", "--config", w.config)
		p.cmd.Env = os.Environ()
		p.cmd.Stderr = p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.cmd.Wait(); close(p.exited) }()
		pid := p.cmd.Process.Pid
		hups := 0
		deadline := time.Now().Add(30 * time.Second)
		for !p.healthy() {
			for range 20 {
				if p.cmd.Process.Signal(syscall.SIGHUP) == nil {
					hups++
				}
			}
			select {
			case <-p.exited:
				t.Fatalf("round %d: the daemon exited while it was sent SIGHUP at start-up (%d sent): %s", round, hups, p.stderr)
			default:
			}
			if time.Now().After(deadline) {
				p.kill()
				t.Fatalf("round %d: the daemon did not come up in 30 s while sent SIGHUP (%d sent): %s", round, hups, p.stderr)
			}
		}
		// A few more while it serves: they are reloads like any other.
		for range 20 {
			p.cmd.Process.Signal(syscall.SIGHUP)
		}
		c := p.client()
		// Every SIGHUP the daemon took is served: the last "SIGHUP" line
		// is followed by a "config reloaded" one.
		for {
			log := p.stderr.String()
			last := strings.LastIndex(log, "SIGHUP: reloading")
			if last >= 0 && strings.Contains(log[last:], "config reloaded") {
				break
			}
			if time.Now().After(deadline) {
				p.kill()
				t.Fatalf("round %d: a SIGHUP taken was not served (%d sent): %s", round, hups, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var names []string
		for _, a := range get(t, c, "/v1/status")["agents"].([]any) {
			names = append(names, a.(map[string]any)["name"].(string))
		}
		if strings.Join(names, ",") != strings.Join(agents, ",") {
			p.kill()
			t.Fatalf("round %d: agents %v, want %v: %s", round, names, agents, p.stderr)
		}
		for _, a := range agents {
			db := filepath.Join(w.state, "agents", a, "residency.db")
			if _, err := os.Stat(db); err != nil {
				t.Fatalf("round %d: %v (the test looks for the residency in the wrong place)", round, err)
			}
			if n := openCount(t, pid, db); n != 1 {
				p.kill()
				t.Fatalf("round %d: agent %s's residency is open %d times, want once: %s", round, a, n, p.stderr)
			}
		}
		c.CloseIdleConnections()
		if code := p.terminate(t); code != 0 {
			t.Fatalf("round %d: exit %d after SIGTERM: %s", round, code, p.stderr)
		}
		log := p.stderr.String()
		for _, bad := range []string{"panic", "level=ERROR", "goroutine "} {
			if strings.Contains(log, bad) {
				t.Fatalf("round %d: the log has %q: %s", round, bad, log)
			}
		}
		t.Logf("round %d: %d SIGHUPs at start-up, %d reloads served", round, hups, strings.Count(log, "config reloaded"))
	}
}
