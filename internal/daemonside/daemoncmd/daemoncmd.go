// Package daemoncmd holds the daemon-side commands of the command line:
// those that link the daemon and what only it needs (metrics, NATS, the
// service managers, the MCP SDK, the packaging's files). Only cmd/continuityd-daemon links it, so
// the continuityd front, which an agent starts at every hook, pays for none
// of their package initialisation; internal/front/cli declares their names and
// summaries with the rest of the table.
package daemoncmd

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/capsule/schema"
	"github.com/continuityd/continuityd/internal/front/cli"
)

// commands are the daemon-side commands by name: cli's table entries with
// no Run.
func commands() map[string]cli.RunFunc {
	return map[string]cli.RunFunc{
		"run":     cmdRun,
		"mcp":     cmdMCP,
		"delx":    cmdDelx,
		"service": cmdService,
		"man":     cmdMan,
		"recover": cmdRecover,
	}
}

// Run runs the daemon-side command name in this process; it is
// cli.Program.DaemonSide for continuityd-daemon.
func Run(ctx context.Context, e *cli.Env, name string, args []string) int {
	run, ok := commands()[name]
	if !ok {
		fmt.Fprintf(e.Stderr, "continuityd: %s is no daemon-side command\n", name)
		return cli.ExitFailed
	}
	return run(ctx, e, args)
}

// CapsuleSchema compiles the published capsule schema for `capsule
// validate`; it is cli.Program.CapsuleSchema for continuityd-daemon.
func CapsuleSchema() (guard.CapsuleSchema, error) {
	rs, err := schema.Compile()
	if err != nil {
		return nil, err // not a nil *Resolved in a non-nil interface
	}
	return rs, nil
}

// Names are the commands Run runs, sorted.
func Names() []string { return slices.Sorted(maps.Keys(commands())) }
