//go:build !unix

package safesocket

// syscallUmask does nothing where there is no umask.
func syscallUmask(int) int { return 0 }
