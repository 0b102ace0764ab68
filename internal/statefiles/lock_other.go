//go:build !unix

package statefiles

// LockName is the file in the state directory that names the daemon
// holding it, where the platform can lock one.
const LockName = "daemon.lock"

// LockStateDir does nothing where flock is unavailable; the socket's own
// check still keeps a second daemon out in all but a simultaneous start.
func LockStateDir(stateDir, socket string) (unlock func(), err error) { return func() {}, nil }
