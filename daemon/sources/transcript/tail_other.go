//go:build !unix

package transcript

import "os"

// fileInode returns 0: without a portable file id, a replaced file is
// noticed only when it is shorter than the offset (see Tail.Inode).
func fileInode(os.FileInfo) uint64 { return 0 }
