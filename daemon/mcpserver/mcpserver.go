// Package mcpserver exposes continuityd to any MCP client, on the official
// MCP Go SDK: the same tools whether served on stdio by `continuityd mcp`
// (which talks to the daemon over its socket) or at /mcp by the daemon
// itself (which talks to its own handler in-process). Every tool is a thin
// call to the local API, so the API's strict checks and error codes apply
// unchanged; a refusal comes back as a tool error carrying the same code.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
)

// Options configures a server.
type Options struct {
	// Client reaches the daemon's local API.
	Client *client.Client
	// Version is reported to MCP clients.
	Version string
	// ResumeLimit bounds the markdown a resume returns (characters).
	ResumeLimit int
}

// New returns an MCP server with continuityd's tools.
func New(o Options) *mcp.Server {
	if o.ResumeLimit == 0 {
		o.ResumeLimit = 10000
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "continuityd", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "continuityd keeps this agent's working state across sessions, crashes and compactions. " +
			"Call resume first after a restart or a compaction. Checkpoint as the work moves, not at the end: " +
			"context runs out first, and a checkpoint written early survives.",
	})
	t := &tools{c: o.Client, limit: o.ResumeLimit}
	for _, def := range definitions {
		h := t.handlers()[def.Name]
		s.AddTool(&mcp.Tool{Name: def.Name, Title: def.Title, Description: def.Description, InputSchema: json.RawMessage(def.Schema)}, h)
	}
	return s
}

type tools struct {
	c     *client.Client
	limit int
}

func (t *tools) handlers() map[string]mcp.ToolHandler {
	return map[string]mcp.ToolHandler{
		"resume":         t.resume,
		"checkpoint":     t.checkpoint,
		"wait_for_event": t.waitForEvent,
		"capsule_read":   t.capsuleRead,
		"capsule_write":  t.capsuleWrite,
		"capsule_seal":   t.capsuleSeal,
		"signal":         t.signal,
	}
}

// args splits a tool's arguments into the control fields continuityd's
// tools share (agent, and a few per tool) and the body passed on as is.
func args(req *mcp.CallToolRequest, control ...string) (map[string]json.RawMessage, map[string]json.RawMessage, error) {
	body := map[string]json.RawMessage{}
	if raw := req.Params.Arguments; len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &body); err != nil {
			return nil, nil, fmt.Errorf("arguments must be a JSON object: %w", err)
		}
	}
	ctl := map[string]json.RawMessage{}
	for _, k := range append(control, "agent") {
		if v, ok := body[k]; ok {
			ctl[k] = v
			delete(body, k)
		}
	}
	return ctl, body, nil
}

// query builds the API query from the control fields.
func query(ctl map[string]json.RawMessage) (url.Values, error) {
	q := url.Values{}
	for k, v := range ctl {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			q.Set(k, s)
			continue
		}
		var n json.Number
		if err := json.Unmarshal(v, &n); err == nil {
			q.Set(k, n.String())
			continue
		}
		var b bool
		if err := json.Unmarshal(v, &b); err == nil {
			q.Set(k, strconv.FormatBool(b))
			continue
		}
		return nil, fmt.Errorf("argument %q must be a string, number or boolean", k)
	}
	return q, nil
}

// call runs one API request and turns its answer into a tool result.
func (t *tools) call(ctx context.Context, method, path string, q url.Values, body []byte) (*mcp.CallToolResult, error) {
	out, err := t.c.Do(ctx, method, path, q, body)
	if err != nil {
		return toolError(err), nil
	}
	var v any
	if json.Unmarshal(out, &v) != nil {
		v = string(out)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(bytes.TrimSpace(out))}},
		StructuredContent: v,
	}, nil
}

// toolError is a refusal as a tool error: the same code, field and message
// as the HTTP API, as text for the model and as structured content.
func toolError(err error) *mcp.CallToolResult {
	var ae *client.APIError
	e := capsule.Error{Code: capsule.CodeInternal, Message: err.Error()}
	switch {
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

func badArgs(err error) *mcp.CallToolResult {
	return toolError(&client.APIError{Status: 400, Code: capsule.CodeInvalidJSON, Message: err.Error()})
}

func (t *tools) resume(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, "peek")
	if err == nil && len(body) > 0 {
		err = fmt.Errorf("unknown argument; resume takes agent and peek")
	}
	if err != nil {
		return badArgs(err), nil
	}
	q, err := query(ctl)
	if err != nil {
		return badArgs(err), nil
	}
	out, err := t.c.Do(ctx, http.MethodGet, "/v1/continuity", q, nil)
	if err != nil {
		return toolError(err), nil
	}
	var r capsule.Resume
	if err := json.Unmarshal(out, &r); err != nil {
		return toolError(err), nil
	}
	var structured any
	json.Unmarshal(out, &structured)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Markdown(t.limit)}},
		StructuredContent: structured,
	}, nil
}

func (t *tools) checkpoint(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.forward(ctx, req, http.MethodPost, "/v1/continuity/checkpoint", "sync")
}

func (t *tools) capsuleWrite(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	c, ok := body["capsule"]
	if !ok || len(body) != 1 {
		return badArgs(errors.New("capsule_write takes {\"capsule\": {…}} and optionally agent")), nil
	}
	q, err := query(ctl)
	if err != nil {
		return badArgs(err), nil
	}
	return t.call(ctx, http.MethodPut, "/v1/capsule", q, c)
}

func (t *tools) capsuleSeal(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.forward(ctx, req, http.MethodPost, "/v1/capsule/seal")
}

func (t *tools) signal(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	if _, ok := body["via"]; !ok {
		body["via"] = json.RawMessage(`"mcp"`)
	}
	q, err := query(ctl)
	if err != nil {
		return badArgs(err), nil
	}
	raw, _ := json.Marshal(body)
	return t.call(ctx, http.MethodPost, "/v1/signals", q, raw)
}

func (t *tools) capsuleRead(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.get(ctx, req, "/v1/capsule")
}

func (t *tools) waitForEvent(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.get(ctx, req, "/v1/continuity/wait", "max_seconds", "after")
}

// forward posts the body as is, with the control fields as the query. No
// arguments post {}: a tool has no "missing body", so the API answers as it
// does for an empty object (capsule_seal seals from the saved state, and
// checkpoint says what it needs).
func (t *tools) forward(ctx context.Context, req *mcp.CallToolRequest, method, path string, control ...string) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, control...)
	if err != nil {
		return badArgs(err), nil
	}
	q, err := query(ctl)
	if err != nil {
		return badArgs(err), nil
	}
	raw, _ := json.Marshal(body)
	return t.call(ctx, method, path, q, raw)
}

// get sends the arguments as the query of a GET.
func (t *tools) get(ctx context.Context, req *mcp.CallToolRequest, path string, control ...string) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, control...)
	if err == nil && len(body) > 0 {
		for k := range body {
			err = fmt.Errorf("unknown argument %q", k)
		}
	}
	if err != nil {
		return badArgs(err), nil
	}
	q, err := query(ctl)
	if err != nil {
		return badArgs(err), nil
	}
	return t.call(ctx, http.MethodGet, path, q, nil)
}
