package api

import (
	"context"
	"net"
	"net/http"

	"github.com/continuityd/continuityd/internal/safesocket"
)

// PeerAs is a ConnContext that records every connection as coming from a
// process of uid, as PeerContext would for a real peer of that user.
func PeerAs(uid uint32) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, peerKey{}, peer{cred: safesocket.Cred{UID: uid, GID: uid, PID: -1}})
	}
}

// RouteProblems is what route says of the table's handlers with drop's
// left out and a handler of extra (no operation's) added.
func RouteProblems(drop, extra string) error {
	a := New(Options{})
	doors := a.doors(http.NotFoundHandler())
	delete(doors, drop)
	if extra != "" {
		doors[extra] = door{plain: func(http.ResponseWriter, *http.Request) {}}
	}
	return a.route(http.NewServeMux(), exactRoutes{}, doors)
}
