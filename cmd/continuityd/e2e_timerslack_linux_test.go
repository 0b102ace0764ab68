package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// threadSlacks returns the timer slack of each thread of process pid, in
// nanoseconds, as /proc shows them.
func threadSlacks(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + task.Name() + "/timerslack_ns")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	return out
}

// TestRunGivesEveryThreadTheTimerSlack: `continuityd run` on a config
// that leaves daemon.timer_slack out runs with its default, 1ms, on every
// thread (the Go runtime's monitor, started before main, too): the
// process it started, executed again in place. "0s" leaves the slack the
// daemon was started with.
func TestRunGivesEveryThreadTheTimerSlack(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	for _, s := range threadSlacks(t, p.cmd.Process.Pid) {
		if s != "1000000" {
			t.Fatalf("daemon threads' slack: %v, want 1000000 ns on each\n%s", threadSlacks(t, p.cmd.Process.Pid), p.stderr)
		}
	}
	p.terminate(t)

	b, err := os.ReadFile(w.config)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(w.config, []byte(strings.Replace(string(b), "[daemon]\n", "[daemon]\ntimer_slack = \"0s\"\n", 1)), 0o600)
	// The daemon is started from this thread, whose slack it inherits.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mine, err := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", syscall.Gettid()))
	if err != nil {
		t.Fatal(err)
	}
	p = startProc(t, w.socket, nil, "run", "--config", w.config)
	slacks := threadSlacks(t, p.cmd.Process.Pid)
	if slacks[0] != strings.TrimSpace(string(mine)) {
		t.Errorf(`timer_slack = "0s": the daemon's main thread has %s ns, want the %s it was started with`, slacks[0], strings.TrimSpace(string(mine)))
	}
}
