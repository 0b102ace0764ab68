//go:build unix

package daemon

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the test process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
