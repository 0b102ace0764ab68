package main

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
func cmdMCP(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "mcp", "[--agent A]")
	var cf clientFlags
	cf.register(fs)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return exitUsage
	}
	c, err := cf.client(e)
	if err != nil {
		return fail(e, err)
	}
	defer c.Close()
	srv := mcpserver.New(mcpserver.Options{Backend: newMCPClientBackend(c), Version: buildVersion(), ResumeLimit: statefiles.ResumeMarkdownLimit})
	t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && err != io.EOF {
		fmt.Fprintf(e.stderr, "continuityd mcp: %v\n", err)
		return exitFailed
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
