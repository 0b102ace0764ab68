//go:build unix

package daemon

import "syscall"

// openFileLimit raises the process's soft open-file limit to its hard
// limit (Go does so itself at start on most systems; this makes it so
// everywhere) and returns it; 0 when it cannot be read or is unlimited.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if r.Cur < r.Max {
		raised := r
		raised.Cur = r.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			r = raised
		}
	}
	if r.Cur > 1<<30 { // unlimited, or as good as
		return 0
	}
	return int(r.Cur)
}
