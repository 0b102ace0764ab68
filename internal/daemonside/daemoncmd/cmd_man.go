package daemoncmd

import (
	"context"

	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/packaging"
)

// cmdMan prints continuityd(1), the page the packages install, for those
// who installed with `go install`: continuityd man | man -l -.
func cmdMan(_ context.Context, e *cli.Env, args []string) int {
	fs := cli.NewFlagSet(e, "man", "")
	if pos, err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage
	} else if len(pos) > 0 {
		return cli.TooMany(e, "man", pos[0])
	}
	e.Stdout.Write(packaging.ManPage())
	return cli.ExitOK
}
