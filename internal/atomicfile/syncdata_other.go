//go:build !linux

package atomicfile

import "os"

// SyncData is a full sync where the platform has no fdatasync (on macOS,
// Go's Sync issues F_FULLFSYNC).
func SyncData(f *os.File) error { return f.Sync() }
