//go:build unix

package safesocket

import (
	"errors"
	"os"
	"syscall"
)

var errLocked = errors.New("locked")

// lockFile takes an exclusive, non-blocking flock on name. The lock dies with
// the process, so a crashed daemon never leaves it held.
func lockFile(name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
