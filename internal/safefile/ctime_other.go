//go:build !linux && !darwin

package safefile

import (
	"io/fs"
	"time"
)

// ChangeTime: this platform's inode change time is not read here (ok
// false); callers fall back to their own clock.
func ChangeTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }
