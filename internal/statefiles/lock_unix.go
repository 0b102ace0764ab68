//go:build unix

package statefiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LockName is the file in the state directory that one daemon at a time
// holds an exclusive flock on, and that names the holder.
const LockName = "daemon.lock"

// LockStateDir takes the state directory for this process: one daemon at
// a time keeps state there. The lock dies with the process, so a crashed
// daemon never leaves it held. A second daemon is refused with the first
// one's PID and socket.
func LockStateDir(stateDir, socket string) (unlock func(), err error) {
	name := filepath.Join(stateDir, LockName)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another continuityd is running on state directory %s (%s); stop it first, or give this one another state_dir and socket", stateDir, holder(name))
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d\nsocket %s\n", os.Getpid(), socket)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// holder describes the daemon holding the lock file at name, from what it
// wrote there: "pid N, socket S".
func holder(name string) string {
	b, err := os.ReadFile(name)
	if err != nil || len(b) > 4096 {
		return "its PID is unknown"
	}
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && (k == "pid" || k == "socket") {
			parts = append(parts, k+" "+strings.Map(func(r rune) rune {
				if r < 0x20 || r == 0x7f {
					return '?'
				}
				return r
			}, v))
		}
	}
	if len(parts) == 0 {
		return "its PID is unknown"
	}
	return strings.Join(parts, ", ")
}
