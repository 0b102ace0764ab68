package timerslack

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary the program under test: it reports its
// process id and slack, calls Ensure with the slack the variable holds,
// then reports every thread's slack. Executed again, it reports again.
const helperEnv = "TIMERSLACK_TEST_HELPER"

func TestHelperProcess(t *testing.T) {
	want := os.Getenv(helperEnv)
	if want == "" {
		t.Skip("run by the other tests")
	}
	slack, err := time.ParseDuration(want)
	if err != nil {
		t.Fatal(err)
	}
	was, _ := Current()
	fmt.Printf("start pid=%d slack=%d\n", os.Getpid(), was)
	err = Ensure(slack)
	fmt.Printf("ensure err=%v marker=%q\n", err, os.Getenv(reexecEnv))
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var each []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/timerslack_ns")
		if err != nil {
			t.Fatal(err)
		}
		each = append(each, strings.TrimSpace(string(b)))
	}
	fmt.Printf("threads pid=%d slack=%s\n", os.Getpid(), strings.Join(each, ","))
}

// runHelper runs the helper asking for slack, with extra environment,
// and returns its report's lines.
func runHelper(t *testing.T, slack string, env ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+slack)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var lines []string
	for l := range strings.Lines(string(out)) {
		if strings.HasPrefix(l, "start ") || strings.HasPrefix(l, "ensure ") || strings.HasPrefix(l, "threads ") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

func TestEnsureExecutesOnceAndEveryThreadHasTheSlack(t *testing.T) {
	lines := runHelper(t, "1ms")
	if len(lines) != 4 {
		t.Fatalf("want two starts (the program, then itself again), one Ensure that returned, one thread report; got:\n%s", strings.Join(lines, "\n"))
	}
	var pid1, pid2, pid3 int
	var slack1, slack2 int64
	fmt.Sscanf(lines[0], "start pid=%d slack=%d", &pid1, &slack1)
	fmt.Sscanf(lines[1], "start pid=%d slack=%d", &pid2, &slack2)
	if pid1 != pid2 || slack1 == int64(time.Millisecond) || slack2 != int64(time.Millisecond) {
		t.Errorf("want the same process started again with the slack set: %q, %q", lines[0], lines[1])
	}
	if lines[2] != `ensure err=<nil> marker=""` {
		t.Errorf("the image executed again: %q (want no error, the marker gone)", lines[2])
	}
	var slacks string
	fmt.Sscanf(lines[3], "threads pid=%d slack=%s", &pid3, &slacks)
	if pid3 != pid1 {
		t.Errorf("pid %d at the end, %d at the start", pid3, pid1)
	}
	for s := range strings.SplitSeq(slacks, ",") {
		if s != "1000000" {
			t.Errorf("a thread's slack is %s ns, want 1000000 on every one (the runtime's monitor too): %q", s, lines[3])
		}
	}
}

func TestEnsureLeavesASetSlackAndZeroAlone(t *testing.T) {
	// A service manager's slack: the helper is started from a thread
	// that has it, and inherits it.
	runtime.LockOSThread()
	was, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(2*time.Millisecond), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	lines := runHelper(t, "2ms")
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(was), 0, 0, 0)
	runtime.UnlockOSThread()
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "slack=2000000") || lines[1] != `ensure err=<nil> marker=""` {
		t.Errorf("slack given from the start: want one start, no error; got:\n%s", strings.Join(lines, "\n"))
	}

	lines = runHelper(t, "0s")
	if len(lines) != 3 || strings.HasSuffix(lines[0], "slack=0") || lines[1] != `ensure err=<nil> marker=""` {
		t.Errorf("zero: want one start, nothing changed; got:\n%s", strings.Join(lines, "\n"))
	}
}

func TestEnsureExecutesAtMostOnce(t *testing.T) {
	// The marker says this image was executed to set the slack, and the
	// slack is not what was asked: a kernel that did not keep it. No
	// second execution, an error that says so, the marker gone.
	lines := runHelper(t, "3ms", reexecEnv+"=1")
	if len(lines) != 3 {
		t.Fatalf("want one start; got:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], "after executing again to set 3ms") || !strings.HasSuffix(lines[1], `marker=""`) {
		t.Errorf("want the refusal named and the marker gone: %q", lines[1])
	}
}
