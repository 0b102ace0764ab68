//go:build !unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// handOff runs the daemon binary at path as a child, where a process
// cannot become another: the same standard streams and environment, the
// interrupts this process receives passed on, and its exit status
// returned. (A console's Ctrl+C reaches the child too; this process, whose
// Main catches it, waits for the child's answer to it.)
func handOff(_ context.Context, e *Env, path string, args []string) int {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.Stdin, e.Stdout, e.Stderr
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: starting %s: %s\n", termsafe.Line(path), termsafe.Text(err.Error()))
		return ExitFailed
	}
	waited := make(chan struct{})
	go func() { // owned here: ends when the child has been waited for
		for {
			select {
			case s := <-interrupts:
				cmd.Process.Signal(s) // not every system can send it; the console's reaches the child anyway
			case <-waited:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(waited)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		fmt.Fprintf(e.Stderr, "continuityd: %s: %s\n", termsafe.Line(path), termsafe.Text(err.Error()))
		return ExitFailed
	}
}
