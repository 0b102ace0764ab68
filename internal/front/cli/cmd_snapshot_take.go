package cli

import (
	"context"
	"fmt"

	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// snapshotTake is `snapshot take [--message TEXT]`: a snapshot of the
// work tree now. The daemon checks the message (a refusal names the
// field); an unchanged tree makes none, and the newest is named instead.
func snapshotTake(ctx context.Context, e *Env, c *client.Client, message string, asJSON bool) int {
	body, err := ops.SnapshotTake.Encode(&ops.TakeRequest{Message: message})
	if err != nil {
		return Fail(e, err)
	}
	a := ops.Args{Body: body}
	if asJSON {
		out, err := ops.SnapshotTake.Do(ctx, c, a)
		return printRaw(e, out, err)
	}
	ans, _, err := ops.SnapshotTake.Call(ctx, c, a)
	if err != nil {
		return Fail(e, err)
	}
	s := ans.Snapshot
	if !ans.New {
		msg := ""
		if message != "" {
			msg = "; the message was not kept"
		}
		fmt.Fprintf(e.Stdout, "nothing changed since snapshot %s (%s): no new snapshot%s\n", termsafe.Name(short(s.ID)), termsafe.Line(s.Trigger), msg)
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "snapshot %s taken: %d added, %d modified, %d deleted\n", termsafe.Name(short(s.ID)), s.Added, s.Modified, s.Deleted)
	return ExitOK
}
