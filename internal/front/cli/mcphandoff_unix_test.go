//go:build unix

package cli

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/internal/ops"
)

// fakeDaemon listens on a real Unix socket and answers one GET /mcp/stdio
// with answer: "404" (a daemon without the endpoint), "drop" (101, takes
// the descriptors, closes them and the connection without its byte: a
// refusal) or "serve" (101, its byte, then closes: a session that ended).
// It returns the socket and what the request asked.
func fakeDaemon(t *testing.T, answer string) (string, <-chan *http.Request) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan *http.Request, 1)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		asked <- req
		if answer == "404" {
			io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+ops.MCPStdioUpgrade+"\r\n\r\n")
		oob := make([]byte, syscall.CmsgSpace(2*4))
		var b [1]byte
		_, oobn, _, _, err := c.(*net.UnixConn).ReadMsgUnix(b[:], oob)
		if err != nil {
			return
		}
		// As the daemon does, they are made non-blocking.
		msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := syscall.ParseUnixRights(&m)
			for _, fd := range fds {
				syscall.SetNonblock(fd, true)
				syscall.Close(fd)
			}
		}
		if answer == "serve" {
			c.Write([]byte{ops.MCPStdioTaken})
		}
	}()
	return sock, asked
}

// handoffEnv is an Env whose stdin and stdout are pipes, with "hello\n"
// waiting on stdin; it returns stdin's other end's reader too.
func handoffEnv(t *testing.T, sock string) (*Env, *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close(); outW.Close(); inR.Close() })
	// Blocking, as an MCP client gives them (os.Pipe's are not).
	for _, f := range []*os.File{inR, outW} {
		rc, err := f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) })
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := inW.WriteString("hello\n"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CONTINUITYD_SOCKET": sock}
	return &Env{Stdin: inR, Stdout: outW, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}, inR
}

// Whatever the daemon answers short of taking the descriptors, nothing is
// handed and nothing of stdin was read: the caller serves the client
// itself. Taken, the front waits for the end and exits 0. Either way stdin
// and stdout are left blocking, as they were given, though the daemon
// made them non-blocking.
func TestHandMCPStdio(t *testing.T) {
	for _, tc := range []struct {
		answer string
		handed bool
	}{{"404", false}, {"drop", false}, {"serve", true}} {
		sock, asked := fakeDaemon(t, tc.answer)
		e, stdin := handoffEnv(t, sock)
		code, handed := handMCPStdio(context.Background(), e, []string{"--agent", "builder"})
		if handed != tc.handed || code != ExitOK {
			t.Errorf("%s: handed %v, exit %d; want handed %v, exit 0", tc.answer, handed, code, tc.handed)
		}
		req := <-asked
		if req.URL.Path != "/mcp/stdio" || req.URL.Query().Get("agent") != "builder" || req.Header.Get("Upgrade") != ops.MCPStdioUpgrade {
			t.Errorf("%s: asked %s %s Upgrade %q", tc.answer, req.Method, req.URL, req.Header.Get("Upgrade"))
		}
		var got [16]byte
		if n, err := stdin.Read(got[:]); string(got[:n]) != "hello\n" {
			t.Errorf("%s: stdin holds %q (%v), want all the client wrote", tc.answer, got[:n], err)
		}
		for _, f := range []*os.File{e.Stdin.(*os.File), e.Stdout.(*os.File)} {
			flags, err := fcntlFlags(f)
			if err != nil || flags&syscall.O_NONBLOCK != 0 {
				t.Errorf("%s: %s left non-blocking (flags %#x, %v)", tc.answer, f.Name(), flags, err)
			}
		}
	}
	// No daemon at all.
	e, _ := handoffEnv(t, filepath.Join(t.TempDir(), "none.sock"))
	if _, handed := handMCPStdio(context.Background(), e, nil); handed {
		t.Error("handed to no daemon")
	}
}

// fcntlFlags are f's file status flags, read without f.Fd() (which would
// make f blocking).
func fcntlFlags(f *os.File) (flags int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	if cerr := rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); cerr != nil {
		return 0, cerr
	}
	return flags, err
}
