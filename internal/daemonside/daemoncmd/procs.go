package daemoncmd

import "runtime"

// spareProcessor gives the daemon one processor (runtime.GOMAXPROCS) more
// than the runtime chose, unless the user set GOMAXPROCS, and returns the
// number it runs with. A commit's fdatasync keeps its processor for the
// length of the sync: the runtime hands a processor blocked in a system
// call to another thread only when its monitor looks, and with the
// daemon's timer slack (package timerslack) the monitor looks about once a
// millisecond, longer than a sync. With one processor per CPU, a 2-CPU
// machine would then run every other request on one processor while
// each commit syncs; the spare one keeps both CPUs at work (16 writers
// +8-9% from another process, resume and the ack unchanged, measured
// paired in docs/PERFORMANCE.md).
//
// Setting it stops the runtime from following a container's CPU limit as
// it changes; the daemon reads it at start.
func spareProcessor(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := runtime.GOMAXPROCS(0) + 1
	runtime.GOMAXPROCS(n)
	return n
}
