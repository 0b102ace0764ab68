// Command continuityd-daemon is continuityd whole: every command, the
// daemon's own (run, service, mcp, delx) included, in its own process.
// The continuityd front runs the light commands itself and hands these to
// this binary, found beside it or on $PATH; see internal/front/cli.
// main only wires the process to the command line.
package main

import (
	"os"

	"github.com/continuityd/continuityd/internal/daemonside/daemoncmd"
	"github.com/continuityd/continuityd/internal/front/cli"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func main() {
	if code, ok := daemoncmd.Hidden(os.Args[1:], os.Stderr); ok {
		os.Exit(code) // a worker the daemon started for a workdir's owner
	}
	os.Exit(cli.Main(cli.Program{Version: version, DaemonSide: daemoncmd.Run, CapsuleSchema: daemoncmd.CapsuleSchema}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
