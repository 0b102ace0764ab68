package gittool

import "syscall"

// sysProcAttr runs git as c (nil: as the daemon) with no supplementary
// groups, and has it killed when the daemon dies: a git left running after
// a SIGKILL of the daemon would hold locks the next daemon clears as stale.
func sysProcAttr(c *Credential) (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: credential(c)}, nil
}
