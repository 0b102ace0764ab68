package mcpserver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/internal/ops"
)

// The tool list is the table's: one tool for each operation that names
// one, in the table's order; a tool without a definition or a handler, or a
// definition or handler no operation names, is refused (and New panics).
func TestToolsAreTheTables(t *testing.T) {
	handlers := (&tools{}).handlers()
	list, err := toolList(handlers)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, tl := range list {
		got = append(got, tl.tool.Name)
	}
	for _, o := range ops.Table() {
		if o.MCP != "" {
			want = append(want, o.MCP)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("tools %v, want the table's %v", got, want)
	}

	missing := map[string]mcp.ToolHandler{}
	for k, v := range handlers {
		if k != "signal" {
			missing[k] = v
		}
	}
	if _, err := toolList(missing); err == nil || !strings.Contains(err.Error(), "tool signal") {
		t.Errorf("a tool without a handler: %v", err)
	}
	handlers["nosuch"] = func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
	if _, err := toolList(handlers); err == nil || !strings.Contains(err.Error(), "tool nosuch") {
		t.Errorf("a handler no operation names: %v", err)
	}
}
