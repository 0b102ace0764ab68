package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
)

// mcpFloorEnv, set in the environment of this test binary, makes it the
// MCP floor of BenchmarkMCPStdioVsReference instead of running tests
// (TestMain): the least a stdio MCP server can do. It reads a line,
// decodes the id and method, and writes an answer made in advance: a tool
// call's is a result of the size the variable gives (characters of the
// result's JSON, as the harness counts them). No SDK, no tool, no disk:
// what remains of a call is the client, the pipes and two wake-ups.
const mcpFloorEnv = "CONTINUITYD_TEST_MCP_FLOOR"

// serveMCPFloor serves the floor on in and out until in ends.
func serveMCPFloor(in io.Reader, out io.Writer, size int) int {
	pad := func(fixed string) string {
		if n := size - len(fixed) - 2*len(`""`); n > 0 {
			return strings.Repeat("x", n/2)
		}
		return ""
	}
	text := pad(`{"content":[{"type":"text","text":}],"structuredContent":{"text":}}`)
	call, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text}},
		"structuredContent": map[string]any{"text": text},
	})
	tools := `{"tools":[{"name":"checkpoint","inputSchema":{"type":"object"}},{"name":"resume","inputSchema":{"type":"object"}}]}`
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue // a notification
		}
		result := []byte("{}")
		switch m.Method {
		case "initialize":
			result = []byte(`{"protocolVersion":` + strconv.Quote(m.Params.ProtocolVersion) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"1"}}`)
		case "tools/list":
			result = []byte(tools)
		case "tools/call":
			result = call
		}
		w.WriteString(`{"jsonrpc":"2.0","id":`)
		w.Write(m.ID)
		w.WriteString(`,"result":`)
		w.Write(result)
		w.WriteString("}\n")
		if w.Flush() != nil {
			return 1
		}
	}
}

// mcpFloorMain is TestMain's branch for the floor: it serves, then exits.
func mcpFloorMain() {
	size, _ := strconv.Atoi(os.Getenv(mcpFloorEnv))
	os.Exit(serveMCPFloor(os.Stdin, os.Stdout, size))
}
