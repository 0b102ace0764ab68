//go:build unix

package daemoncmd

import (
	"io"
	"os"
	"syscall"
)

// pollableStdin returns a reader of r that waits in the runtime's poller
// when r is a pipe or a socket (what an MCP client starts `continuityd mcp`
// with), and a func that puts the pipe back as it was. os.Stdin reads a
// blocking descriptor: the goroutine waiting for the next request holds a
// thread in read(2) for as long as the client is silent, and the runtime
// takes the processor from it and gives it back around every message
// (docs/PERFORMANCE.md: on one processor, 10.4k-12.5k voluntary context
// switches per 1,000 tool calls reading stdin blocking, 6.9k-8.3k through
// the poller). Anything else (a terminal, a file) is read as it is.
func pollableStdin(r io.Reader) (io.Reader, func()) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r, func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return r, func() {}
	}
	// A duplicate, so that the new File owns (and closes) its own
	// descriptor; the open pipe, and so its O_NONBLOCK, is the same one.
	dup := -1
	rc.Control(func(fd uintptr) { dup, err = syscall.Dup(int(fd)) })
	if err != nil || dup < 0 {
		return r, func() {}
	}
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return r, func() {}
	}
	nb := os.NewFile(uintptr(dup), f.Name())
	return nb, func() {
		// The pipe may outlive this process (a wrapper's shell reads
		// it next): leave it blocking, as it was given.
		syscall.SetNonblock(dup, false)
		nb.Close()
	}
}
