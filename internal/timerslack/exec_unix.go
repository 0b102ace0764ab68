//go:build unix

package timerslack

import (
	"errors"
	"syscall"
	"time"
)

// errNotSet marks an execWith that executed nothing because the slack
// could not be set.
var errNotSet = errors.New("timer slack not set")

// Exec executes the program at path (syscall.Exec: this process, argv,
// env) with slack as the timer slack of every thread of the new program;
// zero or less, a system with no timer slack, or a slack the kernel
// refuses executes it with the slack this process has: the program
// starting matters more than its timers. It returns only if the program
// could not be executed.
func Exec(path string, argv, env []string, slack time.Duration) error {
	err := execWith(path, argv, env, slack)
	if errors.Is(err, errNotSet) {
		return syscall.Exec(path, argv, env)
	}
	return err
}
