//go:build !unix

package daemon

// openFileLimit: no such limit here (0, unknown).
func openFileLimit() int { return 0 }
