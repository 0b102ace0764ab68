//go:build unix

package timerslack

import "time"

// Exec executes the program at path (syscall.Exec: this process, argv,
// env) with slack as the timer slack of every thread of the new program;
// zero or less, or a system with no timer slack, executes it with the
// slack this process has. It returns only if the program could not be
// executed.
func Exec(path string, argv, env []string, slack time.Duration) error {
	return execWith(path, argv, env, slack)
}
