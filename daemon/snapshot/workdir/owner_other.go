//go:build !linux

package workdir

import "io/fs"

// OwnerOf knows no owner here: a restore leaves owners as the system makes
// them.
func OwnerOf(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// FileID knows no device and inode here: a restore's journal does not
// record its workdir's.
func FileID(fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
