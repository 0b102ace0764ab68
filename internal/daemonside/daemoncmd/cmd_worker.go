package daemoncmd

import (
	"fmt"
	"io"

	"github.com/continuityd/continuityd/daemon/asowner"
)

// Hidden runs the daemon-side program's hidden command when args name
// it: the worker a daemon running as root starts for the owner of a
// workdir (asowner.Main), with that owner's credentials and its sockets
// as descriptors 3 and 4. It is in no table and no usage, as it is not a
// command to run: run by hand, it refuses. ok is false for any other
// command line.
func Hidden(args []string, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 || args[0] != asowner.WorkerCommand {
		return 0, false
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "continuityd-daemon %s takes no arguments; the daemon starts it itself\n", asowner.WorkerCommand)
		return 2, true
	}
	return asowner.Main(stderr), true
}
