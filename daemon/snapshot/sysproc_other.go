//go:build !linux

package snapshot

import "io/fs"

// ownerOf knows no owner here: a restore leaves owners as the system makes
// them.
func ownerOf(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// fileID knows no device and inode here: a restore's journal does not
// record its workdir's.
func fileID(fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
