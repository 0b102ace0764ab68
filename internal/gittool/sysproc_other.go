//go:build !unix

package gittool

import (
	"errors"
	"syscall"
)

// sysProcAttr has nothing to add without Unix; a run as another user
// cannot be made, so it fails rather than run as the daemon.
func sysProcAttr(c *Credential) (*syscall.SysProcAttr, error) {
	if c != nil {
		return nil, errors.New("gittool: running git as another user needs a Unix system")
	}
	return nil, nil
}
