//go:build unix

package cli

import "syscall"

// SignalReload sends the daemon SIGHUP, its reload signal.
func SignalReload(pid int) error { return syscall.Kill(pid, syscall.SIGHUP) }
