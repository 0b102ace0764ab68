package agent

import (
	"context"
	"os"
)

// callerKey is the context key of WithCaller.
type callerKey struct{}

// WithCaller says, for the operations called with the returned context,
// which user called: the socket's peer, the owner of a spooled event. What
// an agent takes on a caller's word (a transcript a hook names) is
// checked against that user's rights.
func WithCaller(ctx context.Context, uid uint32) context.Context {
	return context.WithValue(ctx, callerKey{}, uid)
}

// callerOf is the user WithCaller recorded; without one, the daemon's own
// (the loopback listener's token holder, the daemon's own calls).
func callerOf(ctx context.Context) uint32 {
	if uid, ok := ctx.Value(callerKey{}).(uint32); ok {
		return uid
	}
	return uint32(os.Geteuid())
}
