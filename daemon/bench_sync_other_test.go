//go:build !linux

package daemon

import "os"

// syncData is fsync(2) where fdatasync(2) is not offered.
func syncData(f *os.File) error { return f.Sync() }
