package snapshot

import (
	"io/fs"
	"syscall"
)

// sysProcAttr makes a git run die with the daemon: a git left running
// after a SIGKILL of the daemon would hold the store's locks while the
// next daemon clears them as stale.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ownerOf returns the owner of a file lstat described.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
