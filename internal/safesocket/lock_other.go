//go:build !unix

package safesocket

import "errors"

var errLocked = errors.New("locked")

// lockFile is a no-op where flock is unavailable; the live-socket probe in
// removeStale still keeps a second daemon out in all but a simultaneous start.
func lockFile(string) (func(), error) { return func() {}, nil }
