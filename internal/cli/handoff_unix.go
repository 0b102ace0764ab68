//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// handOff replaces this process with the daemon binary at path: the same
// PID, standard streams and environment. It returns only when that fails.
func handOff(_ context.Context, e *Env, path string, args []string) int {
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	fmt.Fprintf(e.Stderr, "continuityd: starting %s: %s\n", termsafe.Line(path), termsafe.Text(err.Error()))
	return ExitFailed
}
