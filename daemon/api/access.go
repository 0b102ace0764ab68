package api

import (
	"context"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// peerKey is the context key under which PeerContext keeps a socket
// connection's peer.
type peerKey struct{}

// peer is who connected on the Unix socket, as the kernel recorded it; err
// is set when that could not be read.
type peer struct {
	cred safesocket.Cred
	err  error
}

// PeerContext is the Unix socket server's http.Server.ConnContext: it
// keeps the connecting process's credentials (SO_PEERCRED) in the
// connection's context, where every per-agent door asks whether that user
// may use the agent. A request that carries none (the loopback listener,
// whose token holder may use every agent; in-process calls) is not
// checked.
func PeerContext(ctx context.Context, c net.Conn) context.Context {
	var cred safesocket.Cred
	var err error
	c = unclocked(c)
	if pc, ok := c.(peerConn); ok { // read when accepted (SocketListener)
		cred, err = pc.peerCred()
	} else {
		cred, err = safesocket.PeerCred(c)
	}
	return context.WithValue(ctx, peerKey{}, peer{cred: cred, err: err})
}

// peerOf returns the socket peer of a request's context, nil when the
// request did not come over the socket.
func peerOf(ctx context.Context) *peer {
	if p, ok := ctx.Value(peerKey{}).(peer); ok {
		return &p
	}
	return nil
}

// mayUse refuses with AGENT_FORBIDDEN, naming the agent, when the request
// came over the socket (p is not nil) from a user the agent does not
// admit.
func (p *peer) mayUse(ac config.Agent) error {
	if p == nil {
		return nil
	}
	if p.err != nil {
		return capsule.Refuse(capsule.CodeAgentForbidden, "agent",
			"agent %q: who is connecting could not be read (%v), so no agent is served to it", ac.Name, p.err)
	}
	if admits(ac, p.cred) {
		return nil
	}
	return capsule.Refuse(capsule.CodeAgentForbidden, "agent",
		"agent %q is not served to uid %d: it admits root, the daemon's user and %s", ac.Name, p.cred.UID, admitted(ac))
}

// admits reports whether the agent may be used by a process with cred:
// root and the daemon's own user always; then the users and groups the
// agent names (a group by the process's group or any group its user is a
// member of); with none named, the owner of the agent's workdir.
func admits(ac config.Agent, cred safesocket.Cred) bool {
	return admitsUser(ac, cred.UID, cred.GID, func() []uint32 { return supplementaryGroups(cred) })
}

// admitsUser is admits for uid with primary group gid and the groups
// groups returns (asked only when the agent names groups).
func admitsUser(ac config.Agent, uid, gid uint32, groups func() []uint32) bool {
	if uid == 0 || uid == uint32(os.Getuid()) {
		return true
	}
	if len(ac.UIDs) == 0 && len(ac.GIDs) == 0 {
		owner, ok := workdirOwner(ac.Workdir)
		return ok && owner == uid
	}
	if slices.Contains(ac.UIDs, uid) || slices.Contains(ac.GIDs, gid) {
		return true
	}
	return len(ac.GIDs) > 0 && slices.ContainsFunc(groups(), func(g uint32) bool { return slices.Contains(ac.GIDs, g) })
}

// noGroup stands for a primary group that is not known.
const noGroup = ^uint32(0)

// AdmitsOwner reports whether the agent admits uid, a user known by a file
// it made (a spooled event) rather than by a connected process: its
// groups are those the user database gives it, and also proven, those
// the caller knows it had (the spool's group: only its members may write
// there).
func AdmitsOwner(ac config.Agent, uid uint32, proven ...uint32) bool {
	gid, groups := noGroup, []uint32(nil)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if id, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			gid = uint32(id)
		}
		groups = userGroups(u)
	}
	return admitsUser(ac, uid, gid, func() []uint32 { return append(groups, proven...) })
}

// supplementaryGroups are the groups of the peer's process beyond its own
// (/proc/PID/status on Linux, what the process really holds), else those
// of its user in the group database.
func supplementaryGroups(cred safesocket.Cred) []uint32 {
	if groups, ok := processGroups(cred.PID); ok {
		return groups
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(cred.UID), 10))
	if err != nil {
		return nil
	}
	return userGroups(u)
}

// userGroups are the groups the group database lists u in.
func userGroups(u *user.User) []uint32 {
	names, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var groups []uint32
	for _, g := range names {
		if id, err := strconv.ParseUint(g, 10, 32); err == nil {
			groups = append(groups, uint32(id))
		}
	}
	return groups
}

// admitted says whom the agent admits besides root and the daemon's user.
func admitted(ac config.Agent) string {
	if len(ac.Users) == 0 && len(ac.Groups) == 0 {
		return "the owner of its workdir (name others in its users or groups)"
	}
	return "users " + strconv.Quote(strings.Join(ac.Users, ", ")) + " and groups " + strconv.Quote(strings.Join(ac.Groups, ", "))
}
