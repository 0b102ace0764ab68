//go:build unix

package safefile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openInFlags never wait on a FIFO (O_NONBLOCK), never make a terminal the
// controlling one (O_NOCTTY), and never leak into a child (O_CLOEXEC).
const openInFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_CLOEXEC

func openNoWait(path string, follow bool) (*os.File, error) {
	flag := openInFlags
	if !follow {
		flag |= syscall.O_NOFOLLOW
	}
	return os.OpenFile(path, flag, 0)
}

func checkPrivate(fi fs.FileInfo, path string) error {
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &Error{Path: path, Reason: ErrNotPrivate, Detail: fmt.Sprintf(
			"has mode %04o: its group or others have access to it; make it private (chmod 600 %s) or remove it", perm, path)}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &Error{Path: path, Reason: ErrNotPrivate, Detail: fmt.Sprintf(
			"is owned by uid %d, not by this process's uid %d; give it to this user (chown) or remove it", st.Uid, os.Geteuid())}
	}
	return nil
}

func checkOwner(fi fs.FileInfo, path string) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &Error{Path: path, Reason: ErrForeign, Detail: fmt.Sprintf(
			"is owned by uid %d, not by this process's uid %d; it is not used", st.Uid, os.Geteuid())}
	}
	return nil
}

// Owner is the user and group owning what fi describes (from a Stat of an
// opened file: who made it, as the kernel recorded it); ok is false where
// the platform does not say.
func Owner(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
