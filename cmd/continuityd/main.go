// Command continuityd is the continuity daemon for AI agents and its
// client: the light front. It runs the client commands (hook, resume,
// checkpoint, status, …) itself and hands the daemon-side ones (run,
// service, mcp, delx) to continuityd-daemon, so that the process an agent
// starts at every hook links, and initialises, none of the daemon's
// packages. main only wires the process to the command line, internal/front/cli.
package main

import (
	"os"

	// Named cmdline here: the package's tests have a helper called cli.
	cmdline "github.com/continuityd/continuityd/internal/front/cli"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func main() {
	os.Exit(cmdline.Main(cmdline.Program{Version: version, DaemonSide: cmdline.HandToDaemon}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
