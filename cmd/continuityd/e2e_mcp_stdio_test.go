package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioClient is `continuityd mcp` as an MCP client starts it: on pipes,
// with the SDK's client on the other ends. The test holds only its own
// ends, so the client sees EOF on the server's stdout only once every
// process holding the other end (the front, the daemon) has let it go.
type stdioClient struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *syncBuffer
	exited chan struct{}
	pipes  []string // the server's stdin and stdout as /proc shows them ("pipe:[inode]")
}

func startStdioClient(t *testing.T, socket string, args ...string) *stdioClient {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &stdioClient{stderr: &syncBuffer{}, exited: make(chan struct{})}
	for _, f := range []*os.File{inR, outW} {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		c.pipes = append(c.pipes, fmt.Sprintf("pipe:[%d]", fi.Sys().(*syscall.Stat_t).Ino))
	}
	c.cmd = exec.Command(binary, append([]string{"mcp", "--socket", socket}, args...)...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		if c.cs != nil {
			c.cs.Close()
		}
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.cs, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("initialize: %v (stderr %s)", err, c.stderr)
	}
	return c
}

// exe is the executable the client's server process runs now.
func (c *stdioClient) exe(t *testing.T) string {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// waitExit waits for the front to exit and returns its status.
func (c *stdioClient) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("continuityd mcp did not exit within 60 s (stderr %s)", c.stderr)
	}
	return c.cmd.ProcessState.ExitCode()
}

// waitClientEOF waits until the client's session ended: it saw EOF on the
// server's stdout.
func (c *stdioClient) waitClientEOF(t *testing.T) {
	t.Helper()
	ended := make(chan struct{})
	go func() { c.cs.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatal("the MCP client's session did not end within 60 s: its stdout was not closed")
	}
}

var stdioSessionsLine = regexp.MustCompile(`(?m)^continuityd_mcp_sessions\{state="stdio"\} (\S+)`)

// stdioSessionCount reads continuityd_mcp_sessions{state="stdio"} (-1: the
// daemon has never had one, so it reports none).
func stdioSessionCount(t *testing.T, p *proc) int {
	t.Helper()
	c := p.client()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	v, ok := metricValue(t, c, stdioSessionsLine)
	if !ok {
		return -1
	}
	return int(v)
}

// openFDs lists the descriptors process pid has open, with what each is.
func openFDs(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		what, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fds = append(fds, e.Name()+"→"+what)
	}
	return fds
}

// useTools calls a write and a read, as an agent would.
func useTools(t *testing.T, cs *mcp.ClientSession, focus string) {
	t.Helper()
	if res := mcptest.CallTool(t, cs, "checkpoint", `{"focus":"`+focus+`"}`); res.IsError {
		t.Fatalf("checkpoint: %s", mcptest.Text(t, res))
	}
	if res := mcptest.CallTool(t, cs, "resume", `{"peek":true}`); res.IsError || !strings.Contains(mcptest.Text(t, res), focus) {
		t.Fatalf("resume: %v %s", res.IsError, mcptest.Text(t, res))
	}
}

// handedSession starts `continuityd mcp` against p, uses its tools, and
// checks that the daemon serves the session itself: the process the client
// started is still the front (it never became continuityd-daemon, the
// fallback), and the daemon counts one stdio session.
func handedSession(t *testing.T, p *proc, focus string) *stdioClient {
	t.Helper()
	c := startStdioClient(t, p.socket)
	useTools(t, c.cs, focus)
	if exe := c.exe(t); exe != binary {
		t.Fatalf("the client's server process runs %s, want the front %s: the session was not handed to the daemon (stderr %s)", exe, binary, c.stderr)
	}
	if n := stdioSessionCount(t, p); n != 1 {
		t.Fatalf("the daemon counts %d stdio sessions, want 1", n)
	}
	return c
}

// sessionGone waits until the daemon has ended every stdio session and let
// go of what c's session held: no descriptor of c's pipes, and no more
// sockets than it had before (sockets, the baseline). Files the daemon
// opens lazily (a day's archive) and the pipes to its own git runs come
// and go with its other work, so they are not counted.
func sessionGone(t *testing.T, p *proc, sockets int, c *stdioClient) {
	t.Helper()
	pid := p.cmd.Process.Pid
	var fds []string
	n := -2
	waitUntil(t, func() string {
		return fmt.Sprintf("stdio sessions %d; descriptors (%d sockets before; the session's pipes %v): %s", n, sockets, c.pipes, strings.Join(fds, " "))
	}, func() bool {
		n = stdioSessionCount(t, p)
		fds = openFDs(t, pid)
		held := slices.ContainsFunc(fds, func(fd string) bool {
			_, what, _ := strings.Cut(fd, "→")
			return slices.Contains(c.pipes, what)
		})
		return n == 0 && !held && countSockets(fds) <= sockets
	})
}

// countSockets counts the sockets among fds (openFDs).
func countSockets(fds []string) int {
	return len(slices.DeleteFunc(slices.Clone(fds), func(fd string) bool { return !strings.Contains(fd, "→socket:") }))
}

// warmBaseline runs one whole handed session (so what the daemon opens
// once, lazily, is open) and returns the sockets it then has.
func warmBaseline(t *testing.T, p *proc) int {
	t.Helper()
	c := handedSession(t, p, "warm up")
	c.cs.Close()
	if code := c.waitExit(t); code != 0 {
		t.Fatalf("warm-up: continuityd mcp exited %d (stderr %s)", code, c.stderr)
	}
	waitUntil(t, func() string { return "the warm-up session still counted" }, func() bool { return stdioSessionCount(t, p) == 0 })
	return countSockets(openFDs(t, p.cmd.Process.Pid))
}

// The client closes its stdin: the daemon ends the session, closes the
// descriptors and the connection, and the front exits 0.
func TestMCPStdioHandedClientCloses(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	baseline := warmBaseline(t, p)
	c := handedSession(t, p, "closed by the client")
	c.cs.Close() // closes the server's stdin
	if code := c.waitExit(t); code != 0 {
		t.Errorf("continuityd mcp exited %d, want 0 (stderr %s)", code, c.stderr)
	}
	sessionGone(t, p, baseline, c)
}

// The front is killed: the daemon sees its connection close, ends the
// session and lets the client's pipes go (the client sees EOF).
func TestMCPStdioHandedFrontKilled(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	baseline := warmBaseline(t, p)
	c := handedSession(t, p, "the front killed")
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.waitExit(t)
	c.waitClientEOF(t)
	sessionGone(t, p, baseline, c)
}

// The daemon stops: the front exits 0 and the client sees EOF.
func TestMCPStdioHandedDaemonStops(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := handedSession(t, p, "the daemon stops")
	if code := p.terminate(t); code != 0 {
		t.Errorf("daemon exited %d on SIGTERM: %s", code, p.stderr)
	}
	if code := c.waitExit(t); code != 0 {
		t.Errorf("continuityd mcp exited %d, want 0 (stderr %s)", code, c.stderr)
	}
	c.waitClientEOF(t)
}
