//go:build unix

package gittool

import "syscall"

// credential is c as the kernel takes it: no supplementary groups (an
// empty list is set, not the daemon's inherited).
func credential(c *Credential) *syscall.Credential {
	if c == nil {
		return nil
	}
	return &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: []uint32{}}
}
