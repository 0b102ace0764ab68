package atomicfile

import (
	"os"
	"syscall"
)

// SyncData syncs f's data and only the metadata needed to read it back
// (fdatasync(2)): enough for a file whose size and blocks never change,
// such as a preallocated log, and cheaper than a full fsync.
func SyncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
