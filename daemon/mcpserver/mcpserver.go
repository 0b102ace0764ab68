// Package mcpserver exposes continuityd to any MCP client, on the official
// MCP Go SDK. Its tools are the operations of the table (internal/ops)
// that name one, each made from its entry: the input schema from the
// parameters' entries and the request's Go type (the OpenAPI document's
// description of the body), and a call that becomes the operation's HTTP
// request, sent through a client of the daemon's API: over its socket for
// `continuityd-daemon mcp`, or, for the daemon's own sessions (/mcp, and
// stdio handed over), through the API's handler in process, as the
// session's caller. A tool call thus passes the checks, and gets the
// answer and the codes, of the same call over HTTP; a refusal comes back
// as a tool error carrying the API's code.
package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
)

// Options configures a server.
type Options struct {
	// Client carries the tools' calls to the daemon's API.
	Client *client.Client
	// Agent is the session's default agent ("" : the daemon's only one).
	Agent string
	// Version is reported to MCP clients.
	Version string
	// ResumeLimit bounds the markdown a resume returns (characters).
	ResumeLimit int
}

// New returns an MCP server with continuityd's tools. The tools are made
// from the table once per process; an operation whose tool cannot be made
// is a bug the tests catch, and New panics on it.
func New(o Options) *mcp.Server {
	if o.ResumeLimit == 0 {
		o.ResumeLimit = 10000
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "continuityd", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "continuityd keeps this agent's working state across sessions, crashes and compactions. " +
			"Call resume first after a restart or a compaction. Checkpoint as the work moves, not at the end: " +
			"context runs out first, and a checkpoint written early survives.",
	})
	list, err := tools()
	if err != nil {
		panic(err)
	}
	for _, tl := range list {
		s.AddTool(tl.tool, tl.handler(o))
	}
	return s
}

// result is an operation's answer as a tool result: the API's JSON as
// text and as structured content, passed as it came; an answer with a
// markdown form (the resume) is that markdown as text.
func result(tl tool, raw []byte, limit int) *mcp.CallToolResult {
	out := bytes.TrimSpace(raw)
	text := string(out)
	if tl.markdown != nil {
		md, err := tl.markdown(out, limit)
		if err != nil {
			return toolError(err)
		}
		text = md
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: json.RawMessage(out),
	}
}

// toolError is a refusal as a tool error: the same code, field and message
// as the HTTP API, as text for the model and as structured content.
func toolError(err error) *mcp.CallToolResult {
	var ce *capsule.Error
	var ae *client.APIError
	e := capsule.Error{Code: capsule.CodeInternal, Message: err.Error()}
	switch {
	case errors.As(err, &ce):
		e = capsule.Error{Code: ce.Code, Field: ce.Field, Message: ce.Message}
	case errors.As(err, &ae):
		e = capsule.Error{Code: ae.Code, Field: ae.Field, Message: ae.Message}
	case errors.Is(err, client.ErrUnreachable):
		e = capsule.Error{Code: "DAEMON_UNREACHABLE", Message: err.Error() + " (is `continuityd run` running?)"}
	}
	text := e.Code + ": " + e.Message
	if e.Field != "" {
		text = e.Code + " (" + e.Field + "): " + e.Message
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"error": e},
	}
}

// badArgs is a refusal of a tool's arguments: the guard's own (with its
// code and field), or INVALID_JSON.
func badArgs(err error) *mcp.CallToolResult {
	var ce *capsule.Error
	if errors.As(err, &ce) {
		return toolError(err)
	}
	return toolError(capsule.Refuse(capsule.CodeInvalidJSON, "", "%v", err))
}
