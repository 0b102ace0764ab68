package beneath

import (
	"os"

	"golang.org/x/sys/unix"
)

// OpenRead opens name in d for reading: never through a link (name itself
// a link is an error), never waiting on a FIFO. The caller checks that
// what it got is a regular file (Stat).
func (d *Dir) OpenRead(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
