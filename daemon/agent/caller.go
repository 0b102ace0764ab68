package agent

import (
	"context"
	"os"
	"time"
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

// receiptKey is the context key of WithReceipt.
type receiptKey struct{}

// WithReceipt says when the daemon received what the operations called
// with the returned context carry, by its own clock: for a spooled event,
// when its file was made (the kernel's ctime, which its writer cannot set
// back), not when the daemon read it.
func WithReceipt(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, receiptKey{}, at)
}

// receiptOf is the time WithReceipt recorded, else now.
func receiptOf(ctx context.Context) time.Time {
	if at, ok := ctx.Value(receiptKey{}).(time.Time); ok && !at.IsZero() {
		return at
	}
	return time.Now()
}

// ToolTimeSlack is how much earlier than its receipt a tool call may say
// it happened: a hook runs moments before its event reaches the daemon,
// and no further back is believed. Attribution believes only the
// daemon's clock: a tool call dated long before (a shell_start of
// 2000-01-01) would otherwise claim changes a person made since.
const ToolTimeSlack = 2 * time.Second

// toolTime is a tool call's claimed time at held to the daemon's clock:
// from ToolTimeSlack before its receipt to its receipt (zero: its
// receipt).
func toolTime(at, receipt time.Time) time.Time {
	switch {
	case at.IsZero(), at.After(receipt):
		return receipt
	case at.Before(receipt.Add(-ToolTimeSlack)):
		return receipt.Add(-ToolTimeSlack)
	}
	return at
}
