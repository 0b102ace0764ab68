package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// cmdMCP serves continuityd's MCP tools on stdio for an MCP client that
// starts it (Claude Code's mcpServers, Codex's mcp_servers), backed by the
// daemon over its socket. It needs no network and keeps no state itself.
func cmdMCP(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "mcp", "[--agent A]")
	var cf ClientFlags
	cf.Register(fs)
	if pos, err := ParseFlags(fs, args); err != nil || len(pos) > 0 {
		return ExitUsage
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	srv := mcpserver.New(mcpserver.Options{Backend: newMCPClientBackend(c), Version: e.Version, ResumeLimit: statefiles.ResumeMarkdownLimit})
	t := &mcp.IOTransport{Reader: io.NopCloser(e.Stdin), Writer: nopWriteCloser{e.Stdout}}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && err != io.EOF {
		fmt.Fprintf(e.Stderr, "continuityd mcp: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
