//go:build unix && !linux

package timerslack

import (
	"syscall"
	"time"
)

func execWith(path string, argv, env []string, _ time.Duration) error {
	return syscall.Exec(path, argv, env)
}
