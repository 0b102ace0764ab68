//go:build !unix

package agentfiles

import "io/fs"

// owner returns -1: files have no uid here, and nothing runs as root.
func owner(fs.FileInfo) (uid, gid int) { return -1, -1 }
