package daemon

import (
	"os"
	"syscall"
)

// syncData is fdatasync(2), what the residency's write-ahead log uses.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
