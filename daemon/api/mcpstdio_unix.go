//go:build unix

package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/ops"
)

// mcpStdioHandler serves GET /mcp/stdio: MCP on the stdin and stdout of
// `continuityd mcp`, which hands them over the Unix socket so that no
// process of its own stands between the client and the daemon. The
// session's tools are /mcp's (served by api in process, as from the socket's
// peer; ?agent= their default). The connection is answered 101 and taken from net/http;
// it then carries one message of one byte with the two descriptors
// (SCM_RIGHTS), and the daemon's ops.MCPStdioTaken once it serves them. The
// session ends at the client's EOF, when the connection closes (the front
// died or was stopped: it holds nothing else of the session), or when the
// daemon stops (the request's context ends as shutdown begins, and
// Options.Stopping); then both descriptors and the connection are closed.
// What the handler cannot take it refuses, before the 101 in the API's
// error shape; after it, by closing the connection before MCPStdioTaken,
// having read nothing of the client's input.
func (a *API) mcpStdioHandler(api http.Handler) http.HandlerFunc {
	sessions := a.stdio
	return func(w http.ResponseWriter, r *http.Request) {
		if err := mcpStdioRefusal(r); err != nil {
			writeError(w, err)
			return
		}
		if !sessions.open() {
			w.Header().Set("Retry-After", "60")
			writeError(w, capsule.Refuse(capsule.CodeMCPSessionsFull, "",
				"%d MCP sessions on stdio are open, the most daemon.mcp_max_sessions allows: retry later", sessions.max))
			return
		}
		// The session is counted out before its connection closes: a
		// client that sees the close may open the next one at once.
		release := sync.OnceFunc(sessions.close)
		defer release()
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			writeError(w, capsule.Refuse(capsule.CodeInternal, "", "the connection cannot be taken over for MCP on stdio: %v", err))
			return
		}
		defer func() {
			release()
			conn.Close()
		}()
		uc := unixConn(conn)
		switch {
		case brw.Reader.Buffered() > 0:
			release()
			rawRefuse(w, conn, capsule.Refuse(capsule.CodeInvalidMCPRequest, "",
				"%s: the client sent data before the answer; send the descriptors after the 101", r.URL.Path))
			return
		case uc == nil:
			release()
			rawRefuse(w, conn, capsule.Refuse(capsule.CodeInternal, "", "%s: the connection is no Unix socket's (%T)", r.URL.Path, conn))
			return
		}
		// The server's deadlines are an ordinary request's; this one lasts
		// as long as its session.
		uc.SetDeadline(time.Time{})
		if _, err := io.WriteString(uc, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+ops.MCPStdioUpgrade+"\r\n\r\n"); err != nil {
			return
		}
		in, out, err := receiveStdio(uc, config.DefaultReadTimeout)
		if err != nil {
			a.log.Debug("MCP on stdio: the descriptors were not taken", "err", err)
			noteRefusal(w, capsule.CodeInvalidMCPRequest, 0)
			return
		}
		a.serveStdio(api, r, uc, in, out, release)
	}
}

// serveStdio runs the MCP session on in and out until it ends (see
// mcpStdioHandler), then releases its count and closes both.
func (a *API) serveStdio(api http.Handler, r *http.Request, uc *net.UnixConn, in, out *os.File, release func()) {
	defer in.Close()
	defer out.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if a.o.Stopping != nil {
		defer context.AfterFunc(a.o.Stopping, cancel)()
	}
	if _, err := uc.Write([]byte{ops.MCPStdioTaken}); err != nil {
		return
	}
	// The front sends nothing more: a read returns when it closes the
	// connection, or when the session's end closes it below.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var b [1]byte
		uc.Read(b[:])
		cancel()
	}()
	srv := a.mcpServer(api, r)
	err := srv.Run(ctx, &mcpserver.LineTransport{In: in, Out: out})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		a.log.Debug("MCP on stdio: the session ended", "err", err)
	}
	// Closed here, not only deferred: the client sees EOF on its stdout
	// once the front, which holds a copy too, sees the connection close.
	release()
	in.Close()
	out.Close()
	uc.Close()
	<-watched
}

// receiveStdio reads the message carrying the client's stdin and stdout
// (one data byte, two descriptors) within limit, and returns them as Files
// the runtime's poller waits on (a goroutine waits for the client, not a
// thread). Anything else (another count, a descriptor that is not a pipe's
// or a socket's, which the poller could not wait on) is refused and what
// came is closed.
func receiveStdio(uc *net.UnixConn, limit time.Duration) (in, out *os.File, err error) {
	uc.SetReadDeadline(time.Now().Add(limit))
	defer uc.SetReadDeadline(time.Time{})
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(3*4)) // room for a third, to see one and refuse it
	n, oobn, flags, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if got, perr := syscall.ParseUnixRights(&m); perr == nil {
			fds = append(fds, got...)
		} else if err == nil {
			err = perr
		}
	}
	if err == nil {
		err = stdioDescriptors(n, flags, fds)
	}
	if err != nil {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "mcp-stdin"), os.NewFile(uintptr(fds[1]), "mcp-stdout"), nil
}

// stdioDescriptors checks what came (n data bytes, flags, fds) and makes
// the descriptors non-blocking.
func stdioDescriptors(n, flags int, fds []int) error {
	if n != 1 || flags&syscall.MSG_CTRUNC != 0 || len(fds) != 2 {
		return fmt.Errorf("want one byte and two descriptors (stdin, stdout), got %d bytes and %d descriptors (truncated: %v)", n, len(fds), flags&syscall.MSG_CTRUNC != 0)
	}
	for i, fd := range fds {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return err
		}
		kind := st.Mode & syscall.S_IFMT
		if kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
			return fmt.Errorf("descriptor %d is neither a pipe nor a socket (mode %o)", i, st.Mode)
		}
		if kind == syscall.S_IFSOCK {
			if err := connectedStream(fd); err != nil {
				return fmt.Errorf("descriptor %d: %w", i, err)
			}
		}
	}
	for _, fd := range fds {
		if err := syscall.SetNonblock(fd, true); err != nil {
			return err
		}
	}
	return nil
}

// connectedStream refuses a socket that is not a connected stream: one
// that listens (reading it would accept connections, not read a client),
// one of datagrams (whose messages are no byte stream of lines, and could
// come from anyone who may send to it), or one connected to nothing.
func connectedStream(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return err
	}
	if typ != unix.SOCK_STREAM {
		return fmt.Errorf("a socket of type %d, not a stream: stdio is a pipe or a connected stream socket", typ)
	}
	if listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening != 0 {
		return fmt.Errorf("a listening socket: stdio is a pipe or a connected stream socket")
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return fmt.Errorf("a socket connected to nothing (%v): stdio is a pipe or a connected stream socket", err)
	}
	return nil
}

// rawRefuse writes err in the API's shape on a connection net/http no
// longer serves, and notes the refusal on w, the request's.
func rawRefuse(w http.ResponseWriter, c net.Conn, err error) {
	rw := &rawAnswer{header: http.Header{}}
	writeError(rw, err)
	var ce *capsule.Error
	if errors.As(err, &ce) {
		noteRefusal(w, ce.Code, rw.status)
	}
	writeRaw(c, rw)
}

// noteRefusal records, for a request whose connection was taken over, the
// refusal it ended in: its code (continuityd_refused) and, when it was
// answered, its status (the request's latency, which a 101 would not be).
func noteRefusal(w http.ResponseWriter, code string, status int) {
	if rec, ok := w.(*recorder); ok {
		rec.code = code
		if status != 0 {
			rec.status = status
		}
	}
}
