//go:build linux

package baseline

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux this runs on.
const clockTicks = 100

// LiveChildrenCPU is the CPU time (user and system) of this process's
// children that are still running: a long-lived git process the daemon
// keeps (cat-file --batch, check-ignore) is not in ChildrenCPU until it
// ends. Read from /proc/PID/stat of each child, the children found in
// /proc/self/task/*/children (or, where the kernel lacks that file, by
// reading every process's stat); 0 where it cannot be read. Its unit is a
// clock tick (10 ms).
func LiveChildrenCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	kids, listed := childrenListed()
	if !listed {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return 0
		}
		for _, e := range ents {
			if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
				kids = append(kids, e.Name())
			}
		}
	}
	var ticks int64
	for _, pid := range kids {
		raw, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ... utime stime": comm may hold spaces
		// and parentheses, so the fields are counted after its last ")".
		i := strings.LastIndexByte(string(raw), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 13 || f[1] != self {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// childrenListed returns this process's children from each of its
// threads' /proc/self/task/TID/children; false when the kernel has no
// such file.
func childrenListed() ([]string, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	var kids []string
	for _, t := range tasks {
		raw, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			return nil, false
		}
		kids = append(kids, strings.Fields(string(raw))...)
	}
	return kids, true
}

// ThreadCPU is the CPU time (user and system) of the calling OS thread:
// a benchmark locks its goroutine to its thread to leave its own work
// (edits, polling) out of the process's CPU. 0 where it cannot be read.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
