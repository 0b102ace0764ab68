package snapshot

import "syscall"

// sysProcAttr makes a git run die with the daemon: a git left running
// after a SIGKILL of the daemon would hold the store's locks while the
// next daemon clears them as stale.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
