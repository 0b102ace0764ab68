package atomicfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// swap puts spare's content at path in one step: the two names are
// exchanged (renameat2 RENAME_EXCHANGE), so the spare keeps the old
// content's inode for the next write. When path does not exist yet, or
// the file system cannot exchange names, spare is renamed over path (the
// next write then makes a new spare).
func swap(spare, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return os.Rename(spare, path)
	}
	return &os.LinkError{Op: "exchange", Old: spare, New: path, Err: err}
}
