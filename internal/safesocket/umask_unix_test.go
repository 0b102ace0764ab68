//go:build unix

package safesocket

import "syscall"

// syscallUmask sets the process's umask and returns the old one. The
// package's tests do not run in parallel, so no other test sees it.
func syscallUmask(mask int) int { return syscall.Umask(mask) }
