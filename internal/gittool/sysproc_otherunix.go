//go:build unix && !linux

package gittool

import "syscall"

// sysProcAttr runs git as c (nil: as the daemon) with no supplementary
// groups; there is no parent-death signal to ask for here.
func sysProcAttr(c *Credential) (*syscall.SysProcAttr, error) {
	if c == nil {
		return nil, nil
	}
	return &syscall.SysProcAttr{Credential: credential(c)}, nil
}
