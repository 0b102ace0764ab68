// Command continuityd is the continuity daemon for AI agents and its client.
// main only wires the process to the command line, internal/cli.
package main

import (
	"os"

	// Named cmdline here: the package's tests have a helper called cli.
	cmdline "github.com/continuityd/continuityd/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func main() {
	os.Exit(cmdline.Main(cmdline.Program{Version: version}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
