package api

import (
	"context"
	"net"

	"github.com/continuityd/continuityd/internal/safesocket"
)

// PeerAs is a ConnContext that records every connection as coming from a
// process of uid, as PeerContext would for a real peer of that user.
func PeerAs(uid uint32) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, peerKey{}, peer{cred: safesocket.Cred{UID: uid, GID: uid, PID: -1}})
	}
}
