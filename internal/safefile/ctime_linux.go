package safefile

import (
	"io/fs"
	"syscall"
	"time"
)

// ChangeTime is when what fi describes last changed its inode (ctime): set
// by the kernel's clock, never by the file's owner (unlike the
// modification time, which utimes sets to anything). ok is false where the
// platform does not say.
func ChangeTime(fi fs.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctim.Unix()), true
}
