package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// BenchmarkToolCallServerSide: what the server costs per message (the
// SDK's decoding and encoding, and the tool's own work: the request made
// from the arguments, the answer passed on) with a client whose transport
// answers at once, for resume and checkpoint beside ping (the SDK alone). A client writes the JSON-RPC lines itself, so only the server's
// side is counted; `continuityd mcp` adds the socket round trip to the
// daemon (cmd/continuityd's BenchmarkMCPStdioVsReference measures it all).
//
//	go test -run '^$' -bench ToolCallServerSide -benchmem ./daemon/mcpserver/
func BenchmarkToolCallServerSide(b *testing.B) {
	r := &capsule.Resume{Agent: "builder", Seq: 9, Focus: "measure MCP over stdio against the reference memory server",
		Receipts: []string{strings.Repeat("a", 300), strings.Repeat("b", 300)}}
	doc, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"seq":3,"state":{"focus":"measure MCP over stdio against the reference memory server","working_state":{"next_action":"compare the medians"}}}`)
	c := client.NewVia(atOnce(func(req *http.Request) []byte {
		if req.URL.Path == ops.Resume.Op().Path {
			return doc
		}
		return answer
	}), "at once")
	ctx := context.Background()
	fromServer, serverOut := io.Pipe()
	serverIn, toServer := io.Pipe()
	ss, err := mcpserver.New(mcpserver.Options{Client: c}).Connect(ctx, &mcp.IOTransport{Reader: serverIn, Writer: serverOut}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	answers := bufio.NewReader(fromServer)
	id := 0
	roundTrip := func(method, params string) string {
		id++
		fmt.Fprintf(toServer, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		line, err := answers.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		return line
	}
	roundTrip("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	fmt.Fprintln(toServer, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range []struct{ name, method, params string }{
		{"resume", "tools/call", `{"name":"resume","arguments":{"peek":true}}`},
		{"checkpoint", "tools/call", `{"name":"checkpoint","arguments":{"focus":"measure MCP over stdio","working_state":{"next_action":"compare the medians of several interleaved rounds"}}}`},
		{"ping", "ping", `{}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if out := roundTrip(tc.method, tc.params); !strings.Contains(out, `"result"`) || strings.Contains(out, `"isError":true`) {
					b.Fatalf("%s: %s", tc.name, out)
				}
			}
		})
	}
}

// atOnce is a transport that answers every request at once with 200 and
// what answer gives.
type atOnce func(*http.Request) []byte

func (f atOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	body := f(r)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}
