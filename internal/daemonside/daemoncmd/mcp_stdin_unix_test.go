//go:build unix

package daemoncmd

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A pipe as an MCP client gives it (blocking) is read through the runtime's poller (so a read can be given a
// deadline, which a blocking descriptor refuses), reads what was written,
// and is left blocking again, as it was given.
func TestPollableStdinPipe(t *testing.T) {
	// os.Pipe's are already non-blocking: a raw pipe, as a child is given.
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	defer r.Close()
	defer w.Close()
	in, restore := pollableStdin(r)
	f, ok := in.(*os.File)
	if !ok || f == r {
		t.Fatalf("a pipe is read as %T %v, want a new *os.File", in, in)
	}
	if err := f.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("the pipe is not read through the poller: SetReadDeadline: %v", err)
	}
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	f.SetReadDeadline(time.Time{})
	if _, err := w.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "{}\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	restore()
	if fl, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("after restore the pipe is non-blocking (flags %#x, %v)", fl, err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(buf[:1]); err != nil || buf[0] != 'x' {
		t.Errorf("the pipe after restore: %q, %v", buf[:1], err)
	}
}

// A regular file (or a terminal) is read as it is.
func TestPollableStdinFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, restore := pollableStdin(f)
	defer restore()
	if in != io.Reader(f) {
		t.Errorf("a regular file is read as %T, want the file itself", in)
	}
}
