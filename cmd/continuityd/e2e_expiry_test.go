package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// End-to-end tests of what expires and what is bounded (issue 12, gaps 3
// and 9), each against a real daemon subprocess on its Unix socket.

// workspaceWith is newWorkspace with extra [daemon] keys.
func workspaceWith(t *testing.T, daemonKeys string) *workspace {
	w := newWorkspace(t)
	raw, err := os.ReadFile(w.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "[daemon]\n", "[daemon]\n"+daemonKeys+"\n", 1)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// apiError decodes the API's error shape, failing the test on anything else.
func apiError(t *testing.T, what string, body []byte) (code, field, message string) {
	t.Helper()
	var eb struct {
		Error struct{ Code, Field, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code == "" {
		t.Fatalf("%s: not the API's JSON error shape: %q", what, body)
	}
	return eb.Error.Code, eb.Error.Field, eb.Error.Message
}

func mcpClientSession(t *testing.T, p *proc) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := p.client()
	hc.Timeout = 0 // the standalone GET stream is long-lived
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://d/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPToolsWithoutArguments: capsule_seal with no arguments seals from
// the saved state, and checkpoint with none gets the API's own refusal, not
// a 500 from a nil body in the in-process call.
func TestMCPToolsWithoutArguments(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	cs := mcpClientSession(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(name string, args any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("checkpoint", map[string]any{"focus": "seal a capsule over MCP with no arguments"}); res.IsError {
		t.Fatalf("checkpoint with a focus: %s", toolText(res))
	}
	for _, args := range []any{nil, map[string]any{}} {
		res := call("capsule_seal", args)
		if res.IsError || !strings.Contains(toolText(res), `"seq"`) {
			t.Fatalf("capsule_seal with %v: %s", args, toolText(res))
		}
	}
	if res := call("capsule_read", nil); res.IsError || !strings.Contains(toolText(res), "seal a capsule over MCP") {
		t.Fatalf("capsule_read after the seal: %s", toolText(res))
	}
	for _, args := range []any{nil, map[string]any{"sync": true}} {
		res := call("checkpoint", args)
		if !res.IsError || !strings.HasPrefix(toolText(res), "EMPTY_CHECKPOINT") {
			t.Fatalf("checkpoint with %v: want the API's EMPTY_CHECKPOINT, got %s", args, toolText(res))
		}
	}
}

// TestMCPErrorsInAPIShape: /mcp takes the API's body limit (plus room for
// the JSON-RPC envelope) and refuses in the API's JSON shape.
func TestMCPErrorsInAPIShape(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	do := func(method string, body []byte, hdr map[string]string) (int, []byte) {
		req, _ := http.NewRequest(method, "http://d/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	big := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"`), bytes.Repeat([]byte("x"), 5<<20)...)
	big = append(big, `"}}`...)
	status, out := do(http.MethodPost, big, nil)
	if code, _, _ := apiError(t, "5 MiB body", out); status != http.StatusRequestEntityTooLarge || code != "BODY_TOO_LARGE" {
		t.Fatalf("5 MiB body: %d %s", status, out)
	}
	// Just over the API's 64 KiB (a capsule at the limit, wrapped in a tool
	// call) still goes through the transport.
	mid := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","pad":"`), bytes.Repeat([]byte("x"), 65<<10)...)
	mid = append(mid, `"}`...)
	if status, out := do(http.MethodPost, mid, nil); status == http.StatusRequestEntityTooLarge {
		t.Fatalf("a 65 KiB MCP body was refused as too large: %s", out)
	}
	status, out = do(http.MethodPost, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), map[string]string{"Mcp-Session-Id": "NOSUCHSESSION"})
	if code, _, msg := apiError(t, "unknown session", out); status != http.StatusNotFound || code != "NOT_FOUND" || !strings.Contains(msg, "initialize") {
		t.Fatalf("unknown session: %d %s", status, out)
	}
	status, out = do(http.MethodPut, nil, nil)
	if code, _, _ := apiError(t, "PUT /mcp", out); status != http.StatusMethodNotAllowed || code != "METHOD_NOT_ALLOWED" {
		t.Fatalf("PUT /mcp: %d %s", status, out)
	}
}

// TestSlowBodyIsCut: a body trickled a byte a second is cut (408 in the
// API's shape, then the connection closes) long before it would complete;
// without a body deadline the daemon waits for it as long as it trickles.
// daemon.read_timeout is 2 s here (10 s by default): the body needs 100.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	const readTimeout = 2 // seconds
	w := workspaceWith(t, fmt.Sprintf("read_timeout = \"%ds\"", readTimeout))
	startProc(t, w.socket, nil, "run", "--config", w.config)
	conn, err := net.Dial("unix", w.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const length = 100
	fmt.Fprintf(conn, "POST /v1/continuity/checkpoint HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
	answered := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(conn) // until the daemon closes the connection
		answered <- all
	}()
	// Trickle for at most four times the daemon's body deadline.
	for sent := 0; sent < 4*readTimeout; sent++ {
		select {
		case all := <-answered:
			if !bytes.Contains(all, []byte("408 Request Timeout")) || !bytes.Contains(all, []byte(`"code":"REQUEST_TIMEOUT"`)) {
				t.Fatalf("the connection closed after %d bytes with %q; want 408 REQUEST_TIMEOUT", sent, all)
			}
			t.Logf("cut after %d bytes of %d", sent, length)
			return
		case <-time.After(time.Second):
		}
		if _, err := conn.Write([]byte(" ")); err != nil {
			break // closed under the write: the answer is on its way
		}
	}
	select {
	case all := <-answered:
		if !bytes.Contains(all, []byte(`"code":"REQUEST_TIMEOUT"`)) {
			t.Fatalf("answer %q; want 408 REQUEST_TIMEOUT", all)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon was still reading a body trickled a byte a second after %d s", 4*readTimeout)
	}
}

// TestIdleKeepAliveIsClosed: a keep-alive connection left idle is closed by
// the daemon, not held open for ever (after daemon.idle_timeout: 1 s here,
// 30 s by default).
func TestIdleKeepAliveIsClosed(t *testing.T) {
	t.Parallel()
	w := workspaceWith(t, `idle_timeout = "1s"`)
	startProc(t, w.socket, nil, "run", "--config", w.config)
	conn, err := net.Dial("unix", w.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: d\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the daemon closed a keep-alive connection at once")
	}
	conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: want it closed by the daemon (EOF), got %v", err)
	}
}

// TestLongPollsOutlastTheWriteTimeout: the long poll, plain and as an MCP
// tool, runs past the ordinary write timeout (daemon.write_timeout: 5 s
// here, 30 s by default) and still answers; the MCP client's standalone GET
// stream is open all the while.
func TestLongPollsOutlastTheWriteTimeout(t *testing.T) {
	t.Parallel()
	w := workspaceWith(t, `write_timeout = "5s"`)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	cs := mcpClientSession(t, p)
	const secs = 8
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c := p.client()
		c.Timeout = 0
		defer c.CloseIdleConnections()
		resp, err := c.Get("http://d/v1/continuity/wait?max_seconds=" + strconv.Itoa(secs))
		if err != nil {
			t.Errorf("long poll of %d s: %v", secs, err)
			return
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m["woke"] != "timeout" {
			t.Errorf("long poll of %d s: %d %v %v", secs, resp.StatusCode, m, err)
		}
	}()
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*secs*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_event", Arguments: map[string]any{"max_seconds": secs}})
		if err != nil || res.IsError || !strings.Contains(toolText(res), `"woke":"timeout"`) {
			t.Errorf("wait_for_event of %d s: %v %v", secs, err, res)
		}
	}()
	wg.Wait()
	// The session is still usable after it.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("the MCP session after the long poll: %v", err)
	}
}

// initializeBody is an MCP initialize request.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"expiry-test","version":"1"}}}`

// openMCPSession posts an initialize and returns the status, the session id
// and the body.
func openMCPSession(c *http.Client) (int, string, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://d/mcp", strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), out, nil
}

var goroutinesLine = regexp.MustCompile(`(?m)^go_goroutines (\d+)`)

// daemonGoroutines reads go_goroutines from the daemon's /metrics.
func daemonGoroutines(t testing.TB, c *http.Client) int {
	t.Helper()
	n, ok := metricValue(t, c, goroutinesLine)
	if !ok {
		t.Fatalf("no go_goroutines in /metrics")
	}
	return int(n)
}

// metricValue reads the value line matches (its first group) in the
// daemon's /metrics; ok is false when no line matches.
func metricValue(t testing.TB, c *http.Client, line *regexp.Regexp) (float64, bool) {
	t.Helper()
	resp, err := c.Get("http://d/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	m := line.FindSubmatch(out)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("/metrics: %q: %v", m[0], err)
	}
	return v, true
}

// TestMCPSessionsExpireAndAreBounded: sessions nobody closes hold
// goroutines until mcp_session_idle passes, then go; past mcp_max_sessions
// a new one takes the place of an idle one (TestAbandonedMCPSessionsGiveWay
// has the rest of that).
func TestMCPSessionsExpireAndAreBounded(t *testing.T) {
	t.Parallel()
	const max = 150
	w := workspaceWith(t, fmt.Sprintf("mcp_session_idle = \"3s\"\nmcp_max_sessions = %d", max))
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	base := daemonGoroutines(t, c)
	for i := 0; i < max; i++ {
		status, id, out, err := openMCPSession(c)
		if err != nil || status != http.StatusOK || id == "" {
			t.Fatalf("session %d: %v %d %q", i, err, status, out)
		}
	}
	held := daemonGoroutines(t, c)
	if held < base+max/2 {
		t.Fatalf("goroutines %d with %d sessions open, %d before: the test does not see sessions", held, max, base)
	}
	if status, id, out, err := openMCPSession(c); err != nil || status != http.StatusOK || id == "" {
		t.Fatalf("one session over the limit (an idle one gives way): %v %d %s", err, status, out)
	}
	if idle, inCall := mcpSessionStates(t, c); idle+inCall > max {
		t.Fatalf("%d sessions idle and %d in a call, past mcp_max_sessions %d", idle, inCall, max)
	}
	// Idle for mcp_session_idle, they close and their goroutines end.
	deadline := time.Now().Add(60 * time.Second)
	n := held
	for n = daemonGoroutines(t, c); n > base+10; n = daemonGoroutines(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d a minute after %d idle sessions of 3s (baseline %d, %d with them open)", n, max, base, held)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("goroutines: %d before, %d with %d sessions, %d after they expired", base, held, max, n)
	if status, _, out, err := openMCPSession(c); err != nil || status != http.StatusOK {
		t.Fatalf("a new session after the idle ones expired: %v %d %s", err, status, out)
	}
}

// TestStatusAgainstSilentSocketExits3: a socket that accepts and never
// answers is "daemon unreachable" (exit 3) within the client's timeout,
// naming the socket.
func TestStatusAgainstSilentSocketExits3(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "cdsilent")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "silent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "status", "--socket", sock)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("status against a silent socket still waiting after 60 s: %s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d (%v), want 3: %s", code, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), sock) || !strings.Contains(stderr.String(), "no answer") {
		t.Fatalf("the message should name the socket and say it did not answer: %s", stderr.String())
	}
}

// goTypeName matches what encoding/json leaks into messages.
var goTypeName = regexp.MustCompile(`Go (struct|value)|\b(u?int(8|16|32|64)?|float64|string) field|of type|json: |main\.|daemon\.|\bstruct\b|uint64`)

// TestDeadLetterBodiesAreStrict: the dead-letter actions decode their body
// like every other: duplicate keys are refused naming the key, and no
// message shows a Go type.
func TestDeadLetterBodiesAreStrict(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	send := func(path, body string) (int, []byte) {
		resp, err := c.Post("http://d"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, path := range []string{"/v1/deadletter/retry", "/v1/deadletter/discard"} {
		status, out := send(path, `{"upstream":"local","seq":1,"seq":2}`)
		code, _, msg := apiError(t, path+" duplicate seq", out)
		if status != http.StatusBadRequest || code != "INVALID_JSON" || !strings.Contains(msg, `"seq"`) || !strings.Contains(msg, "duplicate") {
			t.Fatalf("%s duplicate seq: %d %s", path, status, out)
		}
		for _, body := range []string{
			`{"upstream":1}`,
			`{"upstream":"local","seq":"7"}`,
			`{"upstream":"local","seq":-1}`,
			`{"upstream":"local","seq":1.5}`,
			`{"upstream":"local","seq":18446744073709551616}`,
			`{"upstream":"local","extra":true}`,
			`{"Upstream":"local"}`,
			`{"seq":3}`,
			`["local"]`,
			``,
			`{"upstream":"local"} {}`,
			`{"upstream":"nosuchupstream"}`,
		} {
			status, out := send(path, body)
			_, _, msg := apiError(t, path+" "+body, out)
			if status != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s, want 400", path, body, status, out)
			}
			if goTypeName.MatchString(msg) {
				t.Errorf("%s %s: the message shows Go internals: %s", path, body, msg)
			}
		}
		if status, out := send(path, `{"upstream":"local"}`); status != http.StatusOK {
			t.Fatalf("%s with a valid body: %d %s", path, status, out)
		}
	}
}
