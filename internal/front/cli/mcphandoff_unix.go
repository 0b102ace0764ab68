//go:build unix

package cli

import (
	"bufio"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// handMCPStdio hands the MCP client's stdin and stdout to the daemon
// (GET /mcp/stdio, then the descriptors over the socket: SCM_RIGHTS), so
// the client talks to the daemon with no process between them. It then
// waits, holding the connection, until the daemon ends the session (the
// client's EOF, or the daemon stopping), and returns ExitOK; a signal to
// this process closes the connection, which ends the session too. It never
// reads stdin. handed is false when it handed nothing (stdin or stdout not
// a pipe or socket, the daemon not reachable, without the endpoint, or
// refusing); nothing was read from stdin then, and the caller serves the
// client another way.
func handMCPStdio(ctx context.Context, e *Env, args []string) (code int, handed bool) {
	in, inOK := e.Stdin.(*os.File)
	out, outOK := e.Stdout.(*os.File)
	if !inOK || !outOK || !pipeOrSocket(in) || !pipeOrSocket(out) {
		return 0, false
	}
	// Flags the daemon side would refuse are its to report.
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cf ClientFlags
	cf.Register(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return 0, false
	}
	sock, err := cf.SocketPath(e)
	if err != nil {
		return 0, false
	}
	deadline := time.Now().Add(client.DefaultTimeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "unix", sock)
	if err != nil {
		return 0, false
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	conn.SetDeadline(deadline)
	br, ok := askStdioUpgrade(conn, cf.Agent)
	if !ok {
		return 0, false
	}
	if _, _, err := conn.WriteMsgUnix([]byte{0}, syscall.UnixRights(int(in.Fd()), int(out.Fd())), nil); err != nil {
		return 0, false
	}
	// The daemon reads and writes them through its poller (non-blocking).
	// The pipes may outlive this process (a wrapper's shell reads them
	// next), and a daemon that died, or refused them, could not put them
	// back as they were given: this process does, whatever happens.
	defer func() {
		syscall.SetNonblock(int(in.Fd()), false)
		syscall.SetNonblock(int(out.Fd()), false)
	}()
	if b, err := br.ReadByte(); err != nil || b != ops.MCPStdioTaken {
		return 0, false // closed before taking them: nothing of stdin was read
	}
	// Handed: from here the session is the daemon's.
	conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	io.Copy(io.Discard, br)
	return ExitOK, true
}

// askStdioUpgrade sends GET /mcp/stdio asking for the upgrade and reads the
// answer; ok only for the daemon's 101.
func askStdioUpgrade(conn net.Conn, agent string) (*bufio.Reader, bool) {
	u := &url.URL{Scheme: "http", Host: "continuityd", Path: ops.MCPStdio.Op().Path}
	if agent != "" {
		u.RawQuery = url.Values{"agent": {agent}}.Encode()
	}
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{
		"Connection": {"Upgrade"}, "Upgrade": {ops.MCPStdioUpgrade}}}
	if err := req.Write(conn); err != nil {
		return nil, false
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, false
	}
	resp.Body.Close()
	return br, resp.StatusCode == http.StatusSwitchingProtocols && resp.Header.Get("Upgrade") == ops.MCPStdioUpgrade && br.Buffered() == 0
}

// pipeOrSocket reports whether f is a pipe or a socket: what an MCP client
// starts its server with, and what the daemon's poller can wait on. A
// terminal or a file stays with this process.
func pipeOrSocket(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}
