package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/ops"
)

// TestToolSchemasAreTheOperations: every tool /mcp lists takes what its
// operation takes and nothing else, described as the operation is. Its
// input schema is a closed object whose properties are agent and the
// tool's parameters (each as the table's entry says: type, summary,
// bounds) and the request body's properties, each equal to the one the
// OpenAPI document (made from the request's Go type) gives the body; with
// BodyIn, that one property is the document's request schema whole. A
// schema written by hand, as the tools' were, differs and is caught.
func TestToolSchemasAreTheOperations(t *testing.T) {
	raw, err := api.OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	requestOf := func(o ops.Op) map[string]any {
		rb := doc.Paths[o.Path][strings.ToLower(o.Method)].RequestBody
		if rb == nil {
			return nil
		}
		return rb.Content["application/json"].Schema
	}

	ta := newTestAPI(t)
	cs := ta.mcpSession(t, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]map[string]any{}
	for _, tl := range res.Tools {
		var schema map[string]any
		b, _ := json.Marshal(tl.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		listed[tl.Name] = schema
	}
	for _, o := range ops.Table() {
		if o.MCP == nil {
			continue
		}
		served, ok := listed[o.MCP.Name]
		if !ok {
			t.Errorf("operation %s's tool %s is not listed", o.Name, o.MCP.Name)
			continue
		}
		delete(listed, o.MCP.Name)
		for _, p := range schemaProblems(o, requestOf(o), served) {
			t.Errorf("tool %s: %s", o.MCP.Name, p)
		}
	}
	for name := range listed {
		t.Errorf("tool %s is listed, and no operation names it", name)
	}

	// The check can fail: the checkpoint tool's schema as it was written
	// by hand, beside the Go types it described, differs from them.
	if problems := schemaProblems(ops.Checkpoint.Op(), requestOf(ops.Checkpoint.Op()), handWrittenCheckpoint(t)); len(problems) == 0 {
		t.Error("the hand-written checkpoint schema passes for the generated one")
	}
}

// schemaProblems says how served, a tool's input schema, differs from the
// one its operation o and the document's request schema (nil: no body)
// make.
func schemaProblems(o ops.Op, request, served map[string]any) []string {
	var problems []string
	if served["type"] != "object" || served["additionalProperties"] != false {
		problems = append(problems, fmt.Sprintf("not a closed object: type %v, additionalProperties %v", served["type"], served["additionalProperties"]))
	}
	props, _ := served["properties"].(map[string]any)
	want := map[string]any{}
	var required []any
	names := o.MCP.Params
	if o.Agent {
		names = append([]string{"agent"}, names...)
	}
	for _, name := range names {
		i := slices.IndexFunc(o.Params, func(p ops.Param) bool { return p.Name == name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("takes %q, no parameter of operation %s", name, o.Name))
			continue
		}
		p := o.Params[i]
		s := map[string]any{"type": p.Type, "description": p.Summary}
		if p.Type == "integer" {
			s["minimum"] = float64(p.Min)
			if p.Max != 0 {
				s["maximum"] = float64(p.Max)
			}
		}
		want[name] = s
	}
	switch {
	case request == nil:
	case o.MCP.BodyIn != "":
		want[o.MCP.BodyIn] = request
		required = []any{o.MCP.BodyIn}
	default:
		body, _ := request["properties"].(map[string]any)
		for k, v := range body {
			want[k] = v
		}
		required, _ = request["required"].([]any)
	}
	for k, w := range want {
		if got, ok := props[k]; !ok {
			problems = append(problems, fmt.Sprintf("has no argument %q", k))
		} else if !reflect.DeepEqual(got, w) {
			g, _ := json.Marshal(got)
			ws, _ := json.Marshal(w)
			problems = append(problems, fmt.Sprintf("argument %q is %s, its operation's %s", k, g, ws))
		}
	}
	for k := range props {
		if _, ok := want[k]; !ok {
			problems = append(problems, fmt.Sprintf("takes %q, which its operation does not", k))
		}
	}
	gotRequired, _ := served["required"].([]any)
	if !reflect.DeepEqual(sortedAny(gotRequired), sortedAny(required)) {
		problems = append(problems, fmt.Sprintf("requires %v, its operation %v", gotRequired, required))
	}
	return problems
}

func sortedAny(v []any) []string {
	out := []string{}
	for _, x := range v {
		out = append(out, fmt.Sprint(x))
	}
	slices.Sort(out)
	return out
}

// handWrittenCheckpoint is the checkpoint tool's input schema as it was
// written out by hand.
func handWrittenCheckpoint(t *testing.T) map[string]any {
	const schema = `{"type": "object", "additionalProperties": false, "properties": {
  "agent": {"type": "string", "description": "The agent; may be left out when the daemon serves one."},
  "sync": {"type": "boolean", "description": "Wait (bounded) for the upstreams and report their answers."},
  "focus": {"type": "string", "maxLength": 4000, "description": "What the agent is working on."},
  "working_state": {"type": "object", "additionalProperties": false, "description": "Private note; fields left out keep their value.",
    "properties": {"next_action": {"type": "string", "maxLength": 4000}, "last_result": {"type": "string", "maxLength": 4000},
      "result_ref": {"type": ["string", "null"], "maxLength": 500}, "waiting_for": {"type": ["string", "null"], "maxLength": 4000}}},
  "decide": {"type": "object", "additionalProperties": false, "required": ["chosen", "because"], "description": "One decision per call.",
    "properties": {"chosen": {"type": "string"}, "because": {"type": "string", "minLength": 24}, "passed_over": {"type": "string"}}},
  "public_status": {"type": "object", "additionalProperties": false, "required": ["phase", "next_action"],
    "properties": {"phase": {"enum": ["acting", "waiting", "resting"]}, "next_action": {"type": "string", "maxLength": 280}}},
  "stop": {"type": "object", "required": ["reason"], "properties": {"reason": {"type": "string"}}},
  "resume_residency": {"type": "boolean", "description": "Lifts a stop. Only on a new operator instruction."}}}`
	var v map[string]any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
