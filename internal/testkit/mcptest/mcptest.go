// Package mcptest is what the MCP tests share: calling a tool with raw
// JSON arguments, reading a result's one text, comparing JSON values
// (tests only).
package mcptest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallTool calls a tool with args as raw JSON ("": no arguments at all).
func CallTool(t testing.TB, cs *mcp.ClientSession, name, args string) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return res
}

// Text is a tool result's one text content.
func Text(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content %+v, want one text", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

// SameJSON reports whether a and b are the same JSON value (texts that
// are not JSON: the same text).
func SameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
