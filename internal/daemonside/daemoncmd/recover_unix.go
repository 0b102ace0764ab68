//go:build unix

package daemoncmd

import "syscall"

// signalReload sends the daemon SIGHUP, its reload signal.
func signalReload(pid int) error { return syscall.Kill(pid, syscall.SIGHUP) }
