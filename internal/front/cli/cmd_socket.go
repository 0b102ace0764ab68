package cli

import (
	"context"
	"fmt"
)

// cmdSocket prints the socket the client commands use, found as they find
// it (--socket, $CONTINUITYD_SOCKET, --config FILE, the default place), so
// that a script or a curl reaches the same daemon whatever the
// environment: S=$(continuityd socket). The default place depends on the
// user and on $XDG_RUNTIME_DIR, which a `su -` or an ssh session may not
// set. It asks no daemon.
func cmdSocket(_ context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "socket", "[--socket PATH | --config FILE]")
	var cf ClientFlags
	cf.Register(fs)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) > 0 {
		return TooMany(e, "socket", pos[0])
	}
	sock, err := cf.SocketPath(e)
	if err != nil {
		return Fail(e, err)
	}
	fmt.Fprintln(e.Stdout, sock)
	return ExitOK
}
