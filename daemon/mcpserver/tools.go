package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/ops"
)

// tool is one operation's MCP tool, made from its table entry.
type tool struct {
	op   ops.Op
	tool *mcp.Tool
	// markdown renders an answer as markdown, the tool's text; nil: the
	// answer's JSON is the text.
	markdown func(raw []byte, limit int) (string, error)
}

// tools are the tools of the operations that name one, in the table's
// order, made once: their input schemas are the same for every session.
var tools = sync.OnceValues(func() ([]tool, error) {
	var list []tool
	names := map[string]string{}
	for _, o := range ops.Table() {
		if o.MCP == nil {
			continue
		}
		if other, ok := names[o.MCP.Name]; ok {
			return nil, fmt.Errorf("mcpserver: operations %s and %s are both the tool %s", other, o.Name, o.MCP.Name)
		}
		names[o.MCP.Name] = o.Name
		schema, err := InputSchema(o)
		if err != nil {
			return nil, fmt.Errorf("mcpserver: the tool %s of operation %s: %w", o.MCP.Name, o.Name, err)
		}
		list = append(list, tool{op: o, markdown: markdownOf(o.AnswerType()),
			tool: &mcp.Tool{Name: o.MCP.Name, Title: o.MCP.Title, Description: o.MCP.Description, InputSchema: schema}})
	}
	return list, nil
})

// markdowner is an answer with a markdown form for people and models.
type markdowner interface{ Markdown(limit int) string }

// markdownOf renders answers of type t as markdown when t has a markdown
// form (the resume), else is nil.
func markdownOf(t reflect.Type) func([]byte, int) (string, error) {
	if t == nil || !reflect.PointerTo(t).Implements(reflect.TypeFor[markdowner]()) {
		return nil
	}
	return func(raw []byte, limit int) (string, error) {
		v := reflect.New(t)
		if err := json.Unmarshal(raw, v.Interface()); err != nil {
			return "", fmt.Errorf("the daemon's answer is not what this server understands (another version?): %w", err)
		}
		return v.Interface().(markdowner).Markdown(limit), nil
	}
}

// handler is the tool's handler for a session: its arguments become the
// operation's request, sent through the session's client.
func (tl tool) handler(o Options) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := request(tl.op, req.Params.Arguments, o.Agent)
		if err != nil {
			return badArgs(err), nil
		}
		raw, err := tl.op.Do(ctx, o.Client, a)
		if err != nil {
			return toolError(err), nil
		}
		return result(tl, raw, o.ResumeLimit), nil
	}
}

// request makes the operation's request from a tool's arguments (raw, a
// JSON object, or nothing): agent (the session's, agent, when left out),
// the parameters the tool takes, and the body (the rest, or the one
// argument BodyIn names). An argument the tool does not take, or one of
// the wrong kind, is refused here; the body's own fields are the API's to
// check, as strictly as any body.
func request(o ops.Op, raw json.RawMessage, agent string) (ops.Args, error) {
	t := o.MCP
	args := map[string]json.RawMessage{}
	if len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		// As strict as any body: a key given twice is refused here, where
		// the map below would keep the last one silently.
		if err := guard.CheckObject(raw, len(raw)); err != nil {
			return ops.Args{}, err
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return ops.Args{}, fmt.Errorf("arguments must be a JSON object: %w", err)
		}
	}
	for k, v := range t.Defaults {
		if _, ok := args[k]; !ok {
			args[k] = json.RawMessage(v)
		}
	}
	a := ops.Args{Query: url.Values{}}
	if v, ok := args["agent"]; ok && o.Agent {
		if err := json.Unmarshal(v, &agent); err != nil {
			return a, fmt.Errorf("argument %q must be a string", "agent")
		}
		delete(args, "agent")
	}
	if agent != "" {
		a.Query.Set("agent", agent)
	}
	for _, name := range t.Params {
		v, ok := args[name]
		if !ok {
			continue
		}
		delete(args, name)
		i := slices.IndexFunc(o.Params, func(p ops.Param) bool { return p.Name == name })
		if i < 0 {
			return a, fmt.Errorf("the tool %s takes %q, which operation %s does not", t.Name, name, o.Name)
		}
		p := o.Params[i]
		s, err := paramValue(p, v)
		if err != nil {
			return a, err
		}
		switch {
		case s == "":
		case p.In == "path":
			a.ID = s
		default:
			a.Query.Set(name, s)
		}
	}
	if a.ID == "" && strings.Contains(o.Path, "{id}") {
		if err := json.Unmarshal(json.RawMessage(t.Defaults["id"]), &a.ID); err != nil || a.ID == "" {
			return a, fmt.Errorf("argument %q is missing", "id")
		}
	}
	body, err := bodyOf(o, args)
	a.Body = body
	return a, err
}

// paramValue is a parameter's argument as its query value: a boolean
// (true, or a string strconv.ParseBool reads) as "true", false as none (a
// flag left out); a non-negative integer (or a string of one) as its
// digits; a string as it is. The API checks the value's range, as for any
// query.
func paramValue(p ops.Param, v json.RawMessage) (string, error) {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	switch p.Type {
	case "boolean":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			var perr error
			if b, perr = strconv.ParseBool(s); !isString || perr != nil {
				return "", fmt.Errorf("argument %q must be a boolean", p.Name)
			}
		}
		if !b {
			return "", nil
		}
		return "true", nil
	case "integer":
		n := s
		if !isString {
			var num json.Number
			if json.Unmarshal(v, &num) != nil {
				return "", fmt.Errorf("argument %q must be a non-negative integer", p.Name)
			}
			n = num.String()
		}
		if _, err := strconv.ParseUint(n, 10, 64); err != nil {
			return "", fmt.Errorf("argument %q must be a non-negative integer", p.Name)
		}
		return n, nil
	default:
		if !isString {
			return "", fmt.Errorf("argument %q must be a string", p.Name)
		}
		return s, nil
	}
}

// bodyOf is the request body the arguments left carry: none for an
// operation without one (an argument left is one the tool does not take),
// the one argument BodyIn names, or the arguments as an object (no
// arguments: an empty one).
func bodyOf(o ops.Op, args map[string]json.RawMessage) ([]byte, error) {
	t := o.MCP
	switch {
	case o.Request == nil:
		for k := range args {
			return nil, fmt.Errorf("unknown argument %q; %s takes %s", k, t.Name, strings.Join(argumentNames(o), ", "))
		}
		return nil, nil
	case t.BodyIn != "":
		body, ok := args[t.BodyIn]
		if !ok || len(args) != 1 {
			return nil, fmt.Errorf("%s takes {%q: {…}} and %s", t.Name, t.BodyIn, strings.Join(argumentNames(o), ", "))
		}
		return body, nil
	}
	return json.Marshal(args)
}

// argumentNames are the arguments a tool takes besides its body: agent,
// and its parameters.
func argumentNames(o ops.Op) []string {
	var names []string
	if o.Agent {
		names = append(names, "agent")
	}
	return append(names, o.MCP.Params...)
}
