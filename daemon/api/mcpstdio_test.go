//go:build linux

package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// stdioServer serves the API on a real Unix socket, as the daemon does
// (the peer's credentials in each connection's context), with room for one
// stdio session, its requests recorded in requests (nil: not). stop is the
// daemon stopping: the requests' context and Options.Stopping end.
func stdioServer(t *testing.T, requests *prometheus.HistogramVec) (sock string, stop func(), a *api.API) {
	t.Helper()
	return stdioServerWith(t, api.Options{Requests: requests})
}

// stdioServerWith is stdioServer with the API's options (its Version,
// MCPMaxSessions and Stopping set here).
func stdioServerWith(t testing.TB, o api.Options) (sock string, stop func(), a *api.API) {
	t.Helper()
	dir, err := os.MkdirTemp("", "stdio")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	o.Version, o.MCPMaxSessions, o.Stopping = "test", 1, ctx
	a = api.New(o)
	srv := api.NewServer(a.Handler(), ctx, slog.New(slog.DiscardHandler), api.Timeouts{})
	srv.ConnContext = api.PeerContext
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }()
	t.Cleanup(func() { stop(); srv.Close(); <-served })
	return sock, stop, a
}

// askUpgrade sends GET /mcp/stdio (with the upgrade's headers when upgrade
// is set, and extra right behind it) and reads the answer's status and
// error code.
func askUpgrade(t testing.TB, sock string, upgrade bool, extra string) (*net.UnixConn, *bufio.Reader, int, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "GET /mcp/stdio HTTP/1.1\r\nHost: continuityd\r\n"
	if upgrade {
		req += "Connection: Upgrade\r\nUpgrade: " + ops.MCPStdioUpgrade + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n" + extra)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Error struct{ Code string } `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return c.(*net.UnixConn), br, resp.StatusCode, v.Error.Code
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// fdsBack waits until the process has no more descriptors open than
// before.
func fdsBack(t *testing.T, before int) {
	t.Helper()
	n := 0
	testwait.Until(t, func() string { return fmt.Sprintf("%d descriptors open, %d before", n, before) },
		func() bool { n = openFDs(t); return n <= before })
}

func pipes(t testing.TB) (inR, inW, outR, outW *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return inR, inW, outR, outW
}

// handPipes hands a pair of pipes to the daemon, as `continuityd mcp`
// does, and returns the connection and the client's ends of the session's
// stdin and stdout.
func handPipes(t testing.TB, sock string) (conn *net.UnixConn, br *bufio.Reader, stdin, stdout *os.File) {
	t.Helper()
	conn, br, status, code := askUpgrade(t, sock, true, "")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d %s", status, code)
	}
	inR, inW, outR, outW := pipes(t)
	if _, _, err := conn.WriteMsgUnix([]byte{0}, syscall.UnixRights(int(inR.Fd()), int(outW.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	if b, err := br.ReadByte(); err != nil || b != ops.MCPStdioTaken {
		t.Fatalf("the daemon's byte: %q %v", b, err)
	}
	return conn, br, inW, outR
}

// handStdio hands a pair of pipes to the daemon (handPipes) and connects
// an MCP client to their other ends.
func handStdio(t *testing.T, sock string) (*net.UnixConn, *bufio.Reader, *mcp.ClientSession) {
	t.Helper()
	conn, br, inW, outR := handPipes(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return conn, br, cs
}

// One session on a pair of pipes: served after the daemon's byte, counted
// against daemon.mcp_max_sessions (a second is refused 503 meanwhile), and
// ended by the client's EOF, which closes the connection and every
// descriptor the session held. The session is no request whose latency
// is recorded (it lasted as long as the client); the refusal is one.
func TestMCPStdioSessionOnPipes(t *testing.T) {
	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "requests"}, []string{"route", "status"})
	sock, _, _ := stdioServer(t, requests)
	before := openFDs(t)
	func() {
		conn, br, cs := handStdio(t, sock)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 12 {
			t.Fatalf("tools: %v %v", tools, err)
		}
		second, _, status, code := askUpgrade(t, sock, true, "")
		if status != http.StatusServiceUnavailable || code != "MCP_SESSIONS_FULL" {
			t.Errorf("a second session at the bound of 1: %d %s, want 503 MCP_SESSIONS_FULL", status, code)
		}
		second.Close()
		cs.Close() // the server's stdin closes
		if n, err := br.ReadByte(); err == nil {
			t.Errorf("the connection carried %q after the session; want it closed", n)
		}
		conn.Close()
	}()
	fdsBack(t, before)
	waitGathered(t, requests, "requests recorded (route status), want only the refusal's", "route=/mcp/stdio,status=503 1")
}

// What cannot be served is refused, and what came is closed: a request
// without the upgrade's headers (400), data sent before the 101 (400), a
// message with three descriptors or with a file (closed without the
// daemon's byte, the descriptors closed, nothing read).
//
// Each is counted in continuityd_refused by its code, and the refusals
// answered with a status are recorded as requests with it.
func TestMCPStdioRefusals(t *testing.T) {
	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "requests"}, []string{"route", "status"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"code"})
	sock, _, _ := stdioServerWith(t, api.Options{Requests: requests, Refused: refused})
	before := openFDs(t)
	if c, _, status, code := askUpgrade(t, sock, false, ""); status != http.StatusBadRequest || code != "INVALID_MCP_REQUEST" {
		t.Errorf("no upgrade: %d %s, want 400 INVALID_MCP_REQUEST", status, code)
	} else {
		c.Close()
	}
	if c, _, status, code := askUpgrade(t, sock, true, "x"); status != http.StatusBadRequest || code != "INVALID_MCP_REQUEST" {
		t.Errorf("data before the 101: %d %s, want 400 INVALID_MCP_REQUEST", status, code)
	} else {
		c.Close()
	}
	file, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	// Sockets that are no connected stream: a listening one, one of
	// datagrams (connected), one connected to nothing.
	listening, err := net.Listen("unix", filepath.Join(filepath.Dir(sock), "l"))
	if err != nil {
		t.Fatal(err)
	}
	listeningFile, err := listening.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	dgram, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	lone, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		fds  func(inR, outW *os.File) []int
	}{
		{"three descriptors", func(inR, outW *os.File) []int { return []int{int(inR.Fd()), int(outW.Fd()), int(outW.Fd())} }},
		{"a file for stdin", func(_, outW *os.File) []int { return []int{int(file.Fd()), int(outW.Fd())} }},
		{"a listening socket for stdin", func(_, outW *os.File) []int { return []int{int(listeningFile.Fd()), int(outW.Fd())} }},
		{"a datagram socket for stdout", func(inR, _ *os.File) []int { return []int{int(inR.Fd()), dgram[0]} }},
		{"an unconnected socket for stdout", func(inR, _ *os.File) []int { return []int{int(inR.Fd()), lone} }},
	} {
		conn, br, status, _ := askUpgrade(t, sock, true, "")
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("%s: upgrade %d", tc.what, status)
		}
		inR, inW, outR, outW := pipes(t)
		if _, err := inW.Write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := conn.WriteMsgUnix([]byte{0}, syscall.UnixRights(tc.fds(inR, outW)...), nil); err != nil {
			t.Fatal(err)
		}
		if b, err := br.ReadByte(); err == nil {
			t.Errorf("%s: the daemon answered %q, want the connection closed", tc.what, b)
		}
		// Nothing was read of stdin: what the client wrote is still there.
		inW.Close()
		var got [8]byte
		if n, _ := inR.Read(got[:]); string(got[:n]) != "{}\n" {
			t.Errorf("%s: stdin holds %q, want what the client wrote", tc.what, got[:n])
		}
		for _, f := range []*os.File{inR, outR, outW} {
			f.Close()
		}
		conn.Close()
	}
	file.Close()
	listeningFile.Close()
	listening.Close()
	syscall.Close(dgram[0])
	syscall.Close(dgram[1])
	syscall.Close(lone)
	fdsBack(t, before)
	waitGathered(t, refused, "refusals counted, want 7 INVALID_MCP_REQUEST (no upgrade, data before the 101, three descriptors, a file, "+
		"a listening, a datagram and an unconnected socket)", "code=INVALID_MCP_REQUEST 7")
	waitGathered(t, requests, "requests recorded, want the two answered refusals (400)", "route=/mcp/stdio,status=400 2")
}

// gathered lists a collector's series as "label=value,… count": a
// counter's value, a histogram's number of observations.
// waitGathered waits until c's series are want: a request is recorded
// when its handler returns, after the client saw its connection close.
func waitGathered(t *testing.T, c prometheus.Collector, what string, want ...string) {
	t.Helper()
	testwait.Until(t, func() string { return fmt.Sprintf("%s: %q", what, gathered(t, c)) },
		func() bool { return slices.Equal(gathered(t, c), want) })
}

func gathered(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			n := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				n = float64(h.GetSampleCount())
			}
			series = append(series, fmt.Sprintf("%s %v", strings.Join(labels, ","), n))
		}
	}
	return series
}

// The daemon stopping ends a session: the client sees EOF on its stdout,
// the connection closes, and the descriptors are let go.
//
// The daemon waits for it (WaitStdioSessions): net/http's Shutdown does
// not, the connection being taken over.
func TestMCPStdioEndsWhenTheDaemonStops(t *testing.T) {
	sock, stop, a := stdioServer(t, nil)
	before := openFDs(t)
	conn, br, cs := handStdio(t, sock)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.WaitStdioSessions(gone); err == nil {
		t.Fatal("WaitStdioSessions returned nil with a session open")
	}
	stop()
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWait()
	if err := a.WaitStdioSessions(waitCtx); err != nil {
		t.Fatalf("the session was still open 30 s after the daemon stopped: %v", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the client's session did not end within 30 s of the daemon stopping")
	}
	if n, err := br.ReadByte(); err == nil {
		t.Errorf("the connection carried %q after the session; want it closed", n)
	}
	conn.Close()
	cs.Close()
	fdsBack(t, before)
}

// Connected stream sockets are stdio as well as pipes are (a client may
// start `continuityd mcp` on a socketpair): the session is served.
func TestMCPStdioSessionOnSockets(t *testing.T) {
	sock, _, _ := stdioServer(t, nil)
	conn, br, status, code := askUpgrade(t, sock, true, "")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d %s", status, code)
	}
	pair := func() (daemonEnd, clientEnd *os.File) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fds[0]), "daemon end"), os.NewFile(uintptr(fds[1]), "client end")
	}
	stdin, in := pair()
	stdout, out := pair()
	if _, _, err := conn.WriteMsgUnix([]byte{0}, syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	stdout.Close()
	if b, err := br.ReadByte(); err != nil || b != ops.MCPStdioTaken {
		t.Fatalf("the daemon's byte: %q %v", b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 12 {
		t.Fatalf("tools over sockets: %v %v", tools, err)
	}
}
