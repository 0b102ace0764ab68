package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
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

// executedAgain reports whether the daemon executed itself again to set
// its slack: the image it executed was started with the marker in its
// environment (/proc shows the environment an image started with).
func executedAgain(t *testing.T, pid int) bool {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(env, []byte("CONTINUITYD_TIMERSLACK_REEXEC="))
}

// TestRunGivesEveryThreadTheTimerSlack: `continuityd run` on a config
// that leaves daemon.timer_slack out runs the daemon with its default,
// 1ms, on every thread (the Go runtime's monitor, started before main,
// too), given by the front as it hands over: the daemon does not execute
// itself again. Another value is given by the daemon executing itself
// again, once, in the same process.
func TestRunGivesEveryThreadTheTimerSlack(t *testing.T) {
	w := newWorkspace(t)
	check := func(want string, again bool) {
		t.Helper()
		p := startProc(t, w.socket, nil, "run", "--config", w.config)
		pid := p.cmd.Process.Pid
		for _, s := range threadSlacks(t, pid) {
			if s != want {
				t.Fatalf("daemon threads' slack: %v, want %s ns on each\n%s", threadSlacks(t, pid), want, p.stderr)
			}
		}
		if got := executedAgain(t, pid); got != again {
			t.Errorf("slack %s ns: the daemon executed itself again: %v, want %v", want, got, again)
		}
		p.terminate(t)
	}
	check("1000000", false)

	b, err := os.ReadFile(w.config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "[daemon]\n") {
		t.Fatalf("the workspace config has no [daemon] table:\n%s", b)
	}
	if err := os.WriteFile(w.config, []byte(strings.Replace(string(b), "[daemon]\n", "[daemon]\ntimer_slack = \"50us\"\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	check("50000", true)
}
