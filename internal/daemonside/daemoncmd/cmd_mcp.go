package daemoncmd

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// cmdMCP serves continuityd's MCP tools on stdio for an MCP client that
// starts it (Claude Code's mcpServers, Codex's mcp_servers): each tool's
// call is its operation's request to the daemon over its socket. It needs no network and keeps no state itself.
// `continuityd mcp` (the front) first hands its stdio to the daemon, which
// then serves the session in process (cli.HandToDaemon); this is what runs
// when it cannot.
func cmdMCP(ctx context.Context, e *cli.Env, args []string) int {
	fs := cli.NewFlagSet(e, "mcp", "[--agent A]")
	var cf cli.ClientFlags
	cf.Register(fs)
	if pos, err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage
	} else if len(pos) > 0 {
		return cli.TooMany(e, "mcp", pos[0])
	}
	c, err := cf.Client(e)
	if err != nil {
		return cli.Fail(e, err)
	}
	defer c.Close()
	// One processor: the process relays one client's calls to the daemon
	// and waits most of the time; with more, each message handed between
	// the SDK's goroutines wakes another thread (measured in
	// docs/PERFORMANCE.md, "MCP over stdio against the reference server").
	// A GOMAXPROCS the user set is kept.
	if e.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	in, restore := pollableStdin(e.Stdin)
	defer restore()
	// The tools' calls go over the socket; the session's default agent is
	// --agent's, which the client sends with every call that names none.
	srv := mcpserver.New(mcpserver.Options{Client: c, Version: e.Version, ResumeLimit: statefiles.ResumeMarkdownLimit})
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{e.Stdout}, MaxLineLength: mcpserver.MaxMessageBytes}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && err != io.EOF {
		fmt.Fprintf(e.Stderr, "continuityd mcp: %v\n", err)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
