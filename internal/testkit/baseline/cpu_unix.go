//go:build unix

package baseline

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process has used,
// children not included; 0 where it cannot be read.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChildrenCPU is the CPU time (user and system) of this process's children
// that have ended and been waited for: the git runs a daemon in this
// process made, for one. 0 where it cannot be read.
func ChildrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
