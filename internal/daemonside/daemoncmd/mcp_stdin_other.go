//go:build !unix

package daemoncmd

import "io"

// pollableStdin is r as it is where standard input is not a descriptor
// the runtime's poller can wait on.
func pollableStdin(r io.Reader) (io.Reader, func()) { return r, func() {} }
