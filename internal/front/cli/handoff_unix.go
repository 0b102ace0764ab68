//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/continuityd/continuityd/internal/termsafe"
	"github.com/continuityd/continuityd/internal/timerslack"
)

// handOff replaces this process with the daemon binary at path: the same
// PID, standard streams and environment, and the daemon's default timer
// slack on every thread, which the daemon would otherwise give itself by
// executing once more (internal/timerslack). It returns only when that
// fails.
func handOff(_ context.Context, e *Env, path string, args []string) int {
	err := timerslack.Exec(path, append([]string{path}, args...), os.Environ(), timerslack.Default)
	fmt.Fprintf(e.Stderr, "continuityd: starting %s: %s\n", termsafe.Line(path), termsafe.Text(err.Error()))
	return ExitFailed
}
