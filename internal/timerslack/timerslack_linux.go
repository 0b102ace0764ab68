package timerslack

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func current() (time.Duration, error) {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("timer slack: %w", err)
	}
	return time.Duration(ns), nil
}

func ensure(slack time.Duration) error {
	again := os.Getenv(reexecEnv) != ""
	if again {
		os.Unsetenv(reexecEnv)
	}
	if slack <= 0 {
		return nil
	}
	was, err := current()
	if err != nil || was == slack {
		return err
	}
	if again {
		return fmt.Errorf("timer slack: %v after executing again to set %v: left as it is", was, slack)
	}
	os.Setenv(reexecEnv, "1")
	err = execWith("/proc/self/exe", os.Args, os.Environ(), slack)
	// Still here: this image goes on, with its threads' slack as it was.
	os.Unsetenv(reexecEnv)
	return fmt.Errorf("timer slack: executing this program again to set %v: %w", slack, err)
}

// execWith executes path with slack set on the calling thread, which the
// new program's threads inherit. When the slack cannot be read or set it
// executes nothing and returns an error wrapping errNotSet.
func execWith(path string, argv, env []string, slack time.Duration) error {
	if slack <= 0 {
		return syscall.Exec(path, argv, env)
	}
	// The slack is the calling thread's, and execve keeps the calling
	// thread's: both on the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	was, err := current()
	if err != nil {
		return fmt.Errorf("%w: %w", errNotSet, err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0); err != nil {
		return fmt.Errorf("%w: setting %v: %w", errNotSet, slack, err)
	}
	err = syscall.Exec(path, argv, env)
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(was), 0, 0, 0)
	return err
}
