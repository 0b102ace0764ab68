package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/mcpserver"
)

// lineServer serves the tools (their calls answered by s) on a
// LineTransport over real pipes, bounded to maxLine, and returns the
// client's ends and the server's end: a channel that gets what Run
// returned.
func lineServer(ctx context.Context, t *testing.T, s *standIn, maxLine int) (stdin, stdout *os.File, ran chan error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ran = make(chan error, 1)
	go func() {
		ran <- mcpserver.New(mcpserver.Options{Client: s.client}).Run(ctx, &mcpserver.LineTransport{In: inR, Out: outW, MaxLine: maxLine})
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Error("the server had not returned 30 s after its stdin closed")
		}
	})
	return inW, outR, ran
}

// noLeaks checks, after everything else the test set up has been let go,
// that no goroutine it started is left.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// The SDK's own client, on its own stdio transport, is served by a
// LineTransport: tools listed, called, refused.
func TestLineTransportServesTheSDKClient(t *testing.T) {
	noLeaks(t)
	s := newStandIn(t)
	s.resume = `{"agent":"builder","seq":4,"focus":"the line transport"}`
	s.answers(200, `{"seq":5}`)
	stdin, stdout, _ := lineServer(context.Background(), t, s, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "resume" }) {
		t.Fatalf("tools: %v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"peek": true}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "the line transport") {
		t.Fatalf("resume: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"bogus": 1}})
	if err != nil || !res.IsError {
		t.Fatalf("resume with an argument it does not take: %+v %v, want a tool error", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "checkpoint", Arguments: map[string]any{"focus": "lines"}})
	if err != nil || res.IsError {
		t.Fatalf("checkpoint: %+v %v", res, err)
	}
	if got := s.take(); len(got) != 2 || got[0].Path != "/v1/continuity" || got[0].Query != "peek=true" || got[1].Path != "/v1/continuity/checkpoint" || got[1].Body != `{"focus":"lines"}` {
		t.Errorf("the daemon was asked %+v", got)
	}
	cs.Close()
}

// rawSession speaks JSON-RPC lines to a LineTransport by hand.
type rawSession struct {
	t       *testing.T
	stdin   *os.File
	answers *bufio.Reader
}

func (s *rawSession) send(line string) {
	s.t.Helper()
	if _, err := s.stdin.WriteString(line); err != nil {
		s.t.Fatal(err)
	}
}

// answer reads the next answer line, decoded.
func (s *rawSession) answer() (id json.RawMessage, result json.RawMessage, code int64, message string) {
	s.t.Helper()
	line, err := s.answers.ReadBytes('\n')
	if err != nil {
		s.t.Fatalf("reading an answer: %v (read %q)", err, line)
	}
	var v struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.JSONRPC != "2.0" {
		s.t.Fatalf("answer %q: %v", line, err)
	}
	if v.Error != nil {
		return v.ID, nil, v.Error.Code, v.Error.Message
	}
	return v.ID, v.Result, 0, ""
}

func newRawSession(t *testing.T, maxLine int) *rawSession {
	stdin, stdout, _ := lineServer(context.Background(), t, newStandIn(t), maxLine)
	s := &rawSession{t: t, stdin: stdin, answers: bufio.NewReader(stdout)}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n")
	if id, res, code, msg := s.answer(); string(id) != "1" || res == nil {
		t.Fatalf("initialize: id %s code %d %s", id, code, msg)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	return s
}

// A line that is no message is answered with an error naming what is
// wrong, and the session goes on: each is followed by a ping, answered.
func TestLineTransportAnswersBadLines(t *testing.T) {
	noLeaks(t)
	const maxLine = 4 << 10
	s := newRawSession(t, maxLine)
	for i, tc := range []struct {
		what, line string
		id         string
		code       int64
		message    string
	}{
		{"not JSON", "hello\x01\n", "null", -32700, "not a JSON object"},
		{"a JSON array (a batch)", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]` + "\n", "null", -32600, "batch"},
		{"no version", `{"id":8,"method":"ping"}` + "\n", "8", -32600, `"jsonrpc": "2.0"`},
		{"another version", `{"jsonrpc":"1.0","id":"x","method":"ping"}` + "\n", `"x"`, -32600, `"jsonrpc": "2.0"`},
		{"an id that is an object", `{"jsonrpc":"2.0","id":{},"method":"ping"}` + "\n", "null", -32600, "id"},
		{"a method that is a number", `{"jsonrpc":"2.0","id":9,"method":3}` + "\n", "9", -32600, "method"},
		{"neither method nor id", `{"jsonrpc":"2.0","result":{}}` + "\n", "null", -32600, "neither"},
		{"keys in capitals", `{"JSONRPC":"2.0","ID":10,"METHOD":"ping"}` + "\n", "null", -32600, `"jsonrpc": "2.0"`},
		{"a line over the bound", `{"jsonrpc":"2.0","id":11,"method":"ping","params":{"pad":"` + strings.Repeat("p", 3*maxLine) + `"}}` + "\n", "null", -32600, fmt.Sprint(maxLine)},
		{"a line over the bound and the reader's buffer", `{"jsonrpc":"2.0","id":12,"method":"ping","params":{"pad":"` + strings.Repeat("p", 40*maxLine) + `"}}` + "\n", "null", -32600, fmt.Sprint(maxLine)},
	} {
		s.send(tc.line)
		id, _, code, message := s.answer()
		if string(id) != tc.id || code != tc.code || !strings.Contains(message, tc.message) {
			t.Errorf("%s: answered id %s code %d %q; want id %s code %d, a message with %q", tc.what, id, code, message, tc.id, tc.code, tc.message)
		}
		if strings.ContainsAny(message, "\x00\x01\n") {
			t.Errorf("%s: the message carries control characters: %q", tc.what, message)
		}
		ping := 100 + i
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", ping))
		if id, res, code, msg := s.answer(); string(id) != fmt.Sprint(ping) || res == nil {
			t.Fatalf("after %s, a ping: id %s code %d %s", tc.what, id, code, msg)
		}
	}
}

// Lines longer than the reader's buffer, but within the bound, are served
// whole; blank lines are skipped; the end of stdin ends the session.
func TestLineTransportLongAndLastLines(t *testing.T) {
	noLeaks(t)
	s := newRawSession(t, 0)
	s.send("\n  \n")
	s.send(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("q", 40<<10) + `"}}}` + "\n")
	if id, res, code, msg := s.answer(); string(id) != "2" || res == nil {
		t.Fatalf("a 40 KiB ping: id %s code %d %s", id, code, msg)
	}
	s.send(`{"jsonrpc":"2.0","id":"three","method":"ping"}` + "\n")
	if id, res, code, msg := s.answer(); string(id) != `"three"` || res == nil {
		t.Fatalf("a ping with a string id: id %s code %d %s", id, code, msg)
	}
	s.stdin.Close()
	if line, err := s.answers.ReadBytes('\n'); err == nil {
		t.Errorf("after stdin ended the server wrote %q, want its stdout closed", line)
	}
}

// The server stopping (its context cancelled) ends a session waiting for
// input: Close unblocks the pending read, and Run returns.
func TestLineTransportCloseEndsAPendingRead(t *testing.T) {
	noLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	stdin, stdout, ran := lineServer(ctx, t, newStandIn(t), 0)
	s := &rawSession{t: t, stdin: stdin, answers: bufio.NewReader(stdout)}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	if id, _, _, _ := s.answer(); string(id) != "1" {
		t.Fatalf("ping answered with id %s", id)
	}
	cancel()
	select {
	case err := <-ran:
		ran <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("Run had not returned 30 s after its context ended, with stdin open")
	}
	if line, err := s.answers.ReadBytes('\n'); err == nil {
		t.Errorf("after the server stopped it wrote %q, want its stdout closed", line)
	}
}
