//go:build !linux

package residency

import "os"

// fdatasync is a full sync where the platform has no fdatasync (on macOS,
// Go's Sync issues F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }
