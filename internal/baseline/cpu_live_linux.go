//go:build linux

package baseline

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux this runs on.
const clockTicks = 100

// LiveChildrenCPU is the CPU time (user and system) of this process's
// children that are still running: a long-lived git process the daemon
// keeps (cat-file --batch, check-ignore) is not in ChildrenCPU until it
// ends. Read from /proc/PID/stat; 0 where it cannot be read. Its unit is
// a clock tick (10 ms).
func LiveChildrenCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
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
