package api

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/daemonside/openapi"
	"github.com/continuityd/continuityd/internal/ops"
)

// OpenAPIDocument is the OpenAPI 3.1 description of the local API, as
// GET /v1/openapi.json serves it and docs/openapi.json keeps it. It does
// not depend on the running daemon (info.version is the API's, v1).
func OpenAPIDocument() ([]byte, error) {
	list, err := operations()
	if err != nil {
		return nil, err
	}
	types := mcpserver.TypeSchemas()
	types[reflect.TypeFor[config.Duration]()] = &jsonschema.Schema{Type: "string"}
	return openapi.Document(openapi.Info{
		Title:   "continuityd local API",
		Version: "1",
		Description: "HTTP/1.1 over the daemon's Unix socket (or its optional loopback listener, " +
			"which needs Authorization: Bearer <api.token from the state directory>). " +
			"Request bodies are strict JSON: an unknown field, a duplicate key or a wrong type is refused. " +
			"MCP (Streamable HTTP, the table's mcp operations) is described by the MCP specification, not here.",
		ErrorBody:   errorBody{},
		BearerAuth:  "the loopback listener's token (api.token in the state directory); the Unix socket needs none",
		TypeSchemas: types,
	}, list)
}

// The refusals any operation may answer: the loopback listener's token,
// Host and Origin checks, and a handler's bug.
var anyRefusals = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError}

// operations are the table's operations (package ops) as the document
// describes them, each body as the MCP tools describe it too
// (mcpserver.RequestSchema); /mcp (and /mcp/stdio, an upgrade) is the MCP
// specification's to describe. A second answer of a route (Op.When) joins
// its route's answers.
func operations() ([]openapi.Operation, error) {
	var out []openapi.Operation
	route := map[string]int{}
	for _, o := range ops.Table() {
		if o.Path == ops.MCPPost.Op().Path || strings.HasPrefix(o.Path, ops.MCPPost.Op().Path+"/") {
			continue
		}
		if i, ok := route[o.Pattern()]; ok && o.When != "" {
			out[i].Answer = openapi.OneOf{out[i].Answer, o.Answer}
			out[i].Query = joinParams(out[i].Query, docParams(o))
			out[i].Errors = joinStatuses(out[i].Errors, docStatuses(o))
			continue
		}
		op := openapi.Operation{ID: o.Name, Method: o.Method, Path: o.Path, Summary: o.Summary,
			Query: docParams(o), Answer: o.Answer, Errors: docStatuses(o), RequestOptional: o.BodyOptional}
		if o.Request != nil {
			s, err := mcpserver.RequestSchema(o)
			if err != nil {
				return nil, fmt.Errorf("operation %s's request: %w", o.Name, err)
			}
			op.Request = s
		}
		if o.Answer == nil && o.AnswerMedia != "" {
			media, _, _ := strings.Cut(o.AnswerMedia, ";")
			op.Answer = &jsonschema.Schema{Type: "string"}
			if media == "application/json" {
				op.Answer = &jsonschema.Schema{Type: "object"}
			} else {
				op.AnswerType = media
			}
		}
		route[o.Pattern()] = len(out)
		out = append(out, op)
	}
	return out, nil
}

// docParams are an operation's query parameters (path parameters are
// the path's). A query's booleans are text, as strconv.ParseBool reads
// them.
func docParams(o ops.Op) []openapi.Param {
	var out []openapi.Param
	for _, p := range o.Params {
		if p.In != "query" {
			continue
		}
		dp := openapi.Param{Name: p.Name, Description: p.Summary}
		switch p.Type {
		case "boolean":
			dp.Schema = &jsonschema.Schema{Type: "string", Enum: []any{"1", "0", "t", "f", "T", "F", "true", "false", "TRUE", "FALSE", "True", "False"}}
		case "integer":
			dp.Schema = &jsonschema.Schema{Type: "integer", Minimum: jsonschema.Ptr(0.0)}
			if p.Min != 0 || p.Max != 0 {
				dp.Schema.Minimum, dp.Schema.Maximum = jsonschema.Ptr(float64(p.Min)), jsonschema.Ptr(float64(p.Max))
			}
		}
		out = append(out, dp)
	}
	return out
}

// docStatuses are the statuses of an operation's error codes, and those
// any operation may answer.
func docStatuses(o ops.Op) []int {
	out := slices.Clone(anyRefusals)
	for _, c := range o.Errors {
		out = append(out, capsule.StatusOf(c))
	}
	return joinStatuses(out, nil)
}

func joinStatuses(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func joinParams(a, b []openapi.Param) []openapi.Param {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.ContainsFunc(out, func(q openapi.Param) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	return out
}

// handleOpenAPI is GET /v1/openapi.json.
func (a *API) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := a.openAPI()
	if err != nil {
		writeError(w, capsule.Refuse(capsule.CodeInternal, "", "the OpenAPI document could not be made: %v", err))
		return
	}
	writeBody(w, http.StatusOK, doc)
}
