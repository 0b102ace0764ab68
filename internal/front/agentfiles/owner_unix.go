//go:build unix

package agentfiles

import (
	"io/fs"
	"syscall"
)

// owner returns a file's owner, or -1 when the system does not say.
func owner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
