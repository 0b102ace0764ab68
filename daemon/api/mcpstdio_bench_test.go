//go:build linux

package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/continuityd/continuityd/daemon/api"
)

// BenchmarkMCPStdioServerSide is the daemon's side of an MCP call on
// stdio, as `continuityd mcp` hands it over (GET /mcp/stdio, the client's
// pipes passed over the socket): one JSON-RPC line written to the
// session's stdin, its answer read from its stdout, against one real agent.
// The client is a bare line reader and writer, so what is measured is the
// daemon's own work: the MCP SDK, the tool, the agent.
//
// Beside it, in the same run, the least a server can do on the same kind
// of pipes: a goroutine that reads a line and writes the same bytes as
// the resume's answer ("floor"). The ratio is resume-ns / floor-ns.
func BenchmarkMCPStdioServerSide(b *testing.B) {
	rt := newTestRuntime(b)
	sock, _, _ := stdioServerWith(b, api.Options{Runtime: rt})
	conn, _, stdin, stdout := handPipes(b, sock)
	b.Cleanup(func() { stdin.Close(); stdout.Close(); conn.Close() })
	call := lineClient(b, stdin, stdout)
	call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	call("", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	checkpoint := `{"name":"checkpoint","arguments":{"focus":"measure MCP over stdio against the reference memory server","working_state":{"next_action":"compare the medians of several interleaved rounds"}}}`
	call("tools/call", checkpoint)
	resume := call("tools/call", `{"name":"resume","arguments":{"peek":true}}`)

	floorIn, floorInW, floorOutR, floorOut := pipes(b)
	go func() {
		defer floorOut.Close()
		r := bufio.NewReader(floorIn)
		for {
			if _, err := r.ReadSlice('\n'); err != nil {
				return
			}
			if _, err := floorOut.Write(resume); err != nil {
				return
			}
		}
	}()
	floor := lineClient(b, floorInW, floorOutR)
	b.Cleanup(func() { floorInW.Close(); floorIn.Close(); floorOutR.Close() })

	for _, tc := range []struct {
		name, method, params string
		call                 func(method, params string) []byte
	}{
		{"floor", "tools/call", `{"name":"resume","arguments":{"peek":true}}`, floor},
		{"resume", "tools/call", `{"name":"resume","arguments":{"peek":true}}`, call},
		{"checkpoint", "tools/call", checkpoint, call},
		{"ping", "ping", `{}`, call},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.call(tc.method, tc.params)
			}
		})
	}
}

// lineClient returns a function that sends one JSON-RPC request (method ""
// : params is the whole message, a notification, and nothing is read) and
// returns its answer's line, failing on an error or a tool's error.
func lineClient(b *testing.B, stdin, stdout *os.File) func(method, params string) []byte {
	answers := bufio.NewReader(stdout)
	id := 0
	var msg []byte
	return func(method, params string) []byte {
		if method == "" {
			if _, err := fmt.Fprintln(stdin, params); err != nil {
				b.Fatal(err)
			}
			return nil
		}
		id++
		msg = fmt.Appendf(msg[:0], `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		if _, err := stdin.Write(msg); err != nil {
			b.Fatal(err)
		}
		line, err := answers.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(line, []byte(`"result"`)) || bytes.Contains(line, []byte(`"isError":true`)) {
			b.Fatalf("%s %s: %s", method, params, line)
		}
		return bytes.Clone(line)
	}
}
