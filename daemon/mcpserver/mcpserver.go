// Package mcpserver exposes continuityd to any MCP client, on the official
// MCP Go SDK: the same tools whether served on stdio by `continuityd mcp`
// (whose Backend, in internal/cli/daemoncmd, talks to the daemon over its socket) or at
// /mcp by the daemon itself (whose Backend calls the agent's operations in
// process, the same Go functions the HTTP handlers call). A refusal comes
// back as a tool error carrying the API's code.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// Backend is what the tools call: one method per tool's operation, with
// the agent named ("" for the session's default) and the body the tool was
// given, answering the operation's answer type (package ops: the same the
// HTTP API encodes). A refusal is a *capsule.Error (or a *client.APIError
// from the socket).
type Backend interface {
	Resume(ctx context.Context, name string, peek bool) (*capsule.Resume, error)
	Checkpoint(ctx context.Context, name string, body []byte, sync bool) (*agent.CheckpointAnswer, error)
	// Wait long-polls; seconds 0 means the default, after nil "from now".
	Wait(ctx context.Context, name string, seconds int, after *uint64) (*agent.WaitAnswer, error)
	Capsule(ctx context.Context, name string) (*capsule.CapsuleRecord, error)
	PutCapsule(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error)
	Seal(ctx context.Context, name string, body []byte) (*agent.CapsuleAnswer, error)
	Signal(ctx context.Context, name string, body []byte) (*agent.SignalAnswer, error)
	// SnapshotList lists the agent's work snapshots, newest first;
	// SnapshotDiff is one's unified diff against its parent (or against),
	// id "" meaning the newest. Both read only.
	SnapshotList(ctx context.Context, name string) (*ops.SnapshotList, error)
	SnapshotDiff(ctx context.Context, name, id, against string) (*agent.DiffAnswer, error)
}

// Options configures a server.
type Options struct {
	// Backend carries out the tools.
	Backend Backend
	// Agent is the session's default agent ("" : the daemon's only one).
	Agent string
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
	t := &tools{b: o.Backend, agent: o.Agent, limit: o.ResumeLimit}
	list, err := toolList(t.handlers())
	if err != nil {
		panic(err) // a bug the tests catch: the tools do not match the table
	}
	for _, tl := range list {
		s.AddTool(tl.tool, tl.handler)
	}
	return s
}

// listed is one tool with its handler.
type listed struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// toolList is the tool list: one tool for each operation of the table
// (package ops) that names one, in the table's order, with its written-out
// definition and its handler; an operation's tool without either, or a
// definition or handler no operation names, is an error.
func toolList(handlers map[string]mcp.ToolHandler) ([]listed, error) {
	defs := map[string]definition{}
	for _, d := range definitions {
		defs[d.Name] = d
	}
	var list []listed
	var problems []string
	named := map[string]bool{}
	for _, o := range ops.Table() {
		if o.MCP == "" {
			continue
		}
		named[o.MCP] = true
		d, hasDef := defs[o.MCP]
		h, hasHandler := handlers[o.MCP]
		if !hasDef || !hasHandler {
			problems = append(problems, fmt.Sprintf("operation %s's tool %s has no definition (%v) or handler (%v)", o.Name, o.MCP, hasDef, hasHandler))
			continue
		}
		list = append(list, listed{&mcp.Tool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: json.RawMessage(d.Schema)}, h})
	}
	for name := range defs {
		if !named[name] {
			problems = append(problems, fmt.Sprintf("tool %s is defined but no operation names it", name))
		}
	}
	for name := range handlers {
		if !named[name] {
			problems = append(problems, fmt.Sprintf("tool %s has a handler but no operation names it", name))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, errors.New("mcpserver: the tools do not match the table of operations (package ops): " + strings.Join(problems, "; "))
	}
	return list, nil
}

type tools struct {
	b     Backend
	agent string
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
		"snapshot_list":  t.snapshotList,
		"snapshot_diff":  t.snapshotDiff,
	}
}

// args splits a tool's arguments into the control fields continuityd's
// tools share (agent, and a few per tool) and the body passed on as is.
func args(req *mcp.CallToolRequest, control ...string) (map[string]json.RawMessage, map[string]json.RawMessage, error) {
	body := map[string]json.RawMessage{}
	if raw := req.Params.Arguments; len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		// As strict as any body: a key given twice is refused here, where
		// the map below would keep the last one silently.
		if err := guard.CheckObject(raw, len(raw)); err != nil {
			return nil, nil, err
		}
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

// control holds a tool's control fields, decoded.
type control struct {
	agent   string
	flags   map[string]bool
	numbers map[string]uint64
}

// decodeControl reads the control fields: agent a string, the rest the
// booleans and counts listed.
func (t *tools) decodeControl(ctl map[string]json.RawMessage, bools, counts []string) (control, error) {
	c := control{agent: t.agent, flags: map[string]bool{}, numbers: map[string]uint64{}}
	for k, v := range ctl {
		switch {
		case k == "agent":
			if err := json.Unmarshal(v, &c.agent); err != nil {
				return c, fmt.Errorf("argument %q must be a string", k)
			}
		case slices.Contains(bools, k):
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				var s string
				if json.Unmarshal(v, &s) != nil {
					return c, fmt.Errorf("argument %q must be a boolean", k)
				}
				if b, err = strconv.ParseBool(s); err != nil {
					return c, fmt.Errorf("argument %q must be a boolean", k)
				}
			}
			c.flags[k] = b
		case slices.Contains(counts, k):
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				var s string
				if json.Unmarshal(v, &s) != nil {
					return c, fmt.Errorf("argument %q must be a non-negative integer", k)
				}
				n = json.Number(s)
			}
			u, err := strconv.ParseUint(n.String(), 10, 64)
			if err != nil {
				return c, fmt.Errorf("argument %q must be a non-negative integer", k)
			}
			c.numbers[k] = u
		}
	}
	return c, nil
}

// result turns an operation's answer into a tool result: its JSON as text,
// and as structured content.
func result[T any](ans *T, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return toolError(err), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ans); err != nil {
		return toolError(err), nil
	}
	out := bytes.TrimSpace(buf.Bytes())
	// The structured content is the same JSON, passed as it is (not
	// decoded into a map to be encoded again, sorted, for every answer).
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(out)}},
		StructuredContent: json.RawMessage(out),
	}, nil
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

// bodyOf encodes what is left of the arguments as the request body; no
// arguments is an empty object.
func bodyOf(body map[string]json.RawMessage) []byte {
	raw, _ := json.Marshal(body)
	return raw
}

func (t *tools) resume(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, "peek")
	if err == nil && len(body) > 0 {
		err = fmt.Errorf("unknown argument; resume takes agent and peek")
	}
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, []string{"peek"}, nil)
	if err != nil {
		return badArgs(err), nil
	}
	r, err := t.b.Resume(ctx, c.agent, c.flags["peek"])
	if err != nil {
		return toolError(err), nil
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return toolError(err), nil
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Markdown(t.limit)}},
		StructuredContent: json.RawMessage(raw),
	}, nil
}

func (t *tools) checkpoint(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, "sync")
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, []string{"sync"}, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.Checkpoint(ctx, c.agent, bodyOf(body), c.flags["sync"]))
}

func (t *tools) capsuleWrite(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	raw, ok := body["capsule"]
	if !ok || len(body) != 1 {
		return badArgs(errors.New("capsule_write takes {\"capsule\": {…}} and optionally agent")), nil
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.PutCapsule(ctx, c.agent, raw))
}

func (t *tools) capsuleSeal(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.Seal(ctx, c.agent, bodyOf(body)))
}

func (t *tools) signal(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	if _, ok := body["via"]; !ok {
		body["via"] = json.RawMessage(`"mcp"`)
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.Signal(ctx, c.agent, bodyOf(body)))
}

func (t *tools) capsuleRead(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err == nil && len(body) > 0 {
		err = unknownArgument(body)
	}
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.Capsule(ctx, c.agent))
}

func (t *tools) waitForEvent(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req, "max_seconds", "after")
	if err == nil && len(body) > 0 {
		err = unknownArgument(body)
	}
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, nil, []string{"max_seconds", "after"})
	if err != nil {
		return badArgs(err), nil
	}
	var after *uint64
	if v, ok := c.numbers["after"]; ok {
		after = &v
	}
	secs := c.numbers["max_seconds"]
	if secs > 1<<20 {
		secs = 1 << 20 // out of range either way; the backend says so
	}
	return result(t.b.Wait(ctx, c.agent, int(secs), after))
}

func unknownArgument(body map[string]json.RawMessage) error {
	for k := range body {
		return fmt.Errorf("unknown argument %q", k)
	}
	return nil
}
