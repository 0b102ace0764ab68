// Package viewstamp tells a view made from values held across the daemon
// when it may be out of date. A resume shows, beside the residency's
// state, what the capture and the snapshot store know (the newest
// snapshot, the paths others changed, what is degraded, work lost); those
// change rarely, while a resume reads them on every call, each behind its
// own lock in its own object. One process-wide stamp lets a resume keep
// the view it made and use it while nothing it shows has changed.
//
// The rule for a holder of such a value: call Changed after the change is
// visible to readers (under the value's lock, or after it) and before the
// change is acknowledged to anyone. The rule for a view: read Now before
// reading the values, tag the view with it, and use the view only while
// Now still returns that tag. A view then never shows less than every
// change completed before it was read: a change completed before Now was
// read is in the values read after it, and one completed after moves the
// stamp past the tag.
//
// The stamp is shared by every place in the process: a change in one
// makes the others' views be made again, which costs a read, never a
// stale answer.
package viewstamp

import "sync/atomic"

var stamp atomic.Uint64

// Changed records that a value some view shows has changed.
func Changed() { stamp.Add(1) }

// Now is the stamp a view read now is tagged with.
func Now() uint64 { return stamp.Load() }
