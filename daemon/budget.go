package daemon

import "github.com/continuityd/continuityd/daemon/api"

// doorBudget shares out the open-file limit (nofile; 0: unknown) between
// the daemon's own files and its doors, so that whatever crowd of
// connections comes, the daemon can still write its state, run git and
// take snapshots:
//
//   - a quarter of the limit (at least 256) stays the daemon's own: its
//     logs, the agents' stores, the watchers, git's pipes, snapshots; and
//     two more for each MCP session on stdio (mcpMaxSessions), whose
//     client's stdin and stdout the daemon holds;
//   - of the rest, a quarter (16 to 1,024) is the loopback listener's,
//     which anyone on the machine may connect to before authenticating;
//   - the Unix socket takes the remainder (32 to 4,096), one user other
//     than root and the daemon's own at most an eighth of it (at least 8).
//
// With the unit's LimitNOFILE=65536 that is 1,024 loopback connections,
// 4,096 on the socket and 512 per user.
func doorBudget(nofile, mcpMaxSessions int) (socket api.SocketLimits, loopback int) {
	const (
		minOwn, maxLoopback, minLoopback = 256, 1024, 16
		maxSocket, minSocket, minPerUser = 4096, 32, 8
	)
	doors := maxSocket + maxLoopback
	if nofile > 0 {
		own := max(minOwn, nofile/4) + 2*max(mcpMaxSessions, 0)
		doors = nofile - own
	}
	loopback = min(max(doors/4, minLoopback), maxLoopback)
	total := min(max(doors-loopback, minSocket), maxSocket)
	return api.SocketLimits{Total: total, PerUser: max(total/8, minPerUser)}, loopback
}
