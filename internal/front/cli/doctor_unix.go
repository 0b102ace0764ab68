//go:build unix

package cli

import "golang.org/x/sys/unix"

// freeSpace is what an unprivileged user may still write on dir's file
// system, in bytes; -1 when it cannot be told.
func freeSpace(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize) // the fields' types differ from one system to another
}
