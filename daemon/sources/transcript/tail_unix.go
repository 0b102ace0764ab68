//go:build unix

package transcript

import (
	"os"
	"syscall"
)

// fileInode returns the inode number behind fi, which tells a rotated file
// from the one that replaced it at the same path.
func fileInode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
