package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// TypeSchemas are the schemas of the request and answer types whose JSON
// is not what their Go shape says (they marshal themselves): the OpenAPI
// document and the tools' input schemas describe them alike.
func TypeSchemas() map[reflect.Type]*jsonschema.Schema {
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[capsule.NullableString](): {Types: []string{"null", "string"}},
		reflect.TypeFor[json.RawMessage]():        {},
	}
}

// capsuleSchema is the published Continuity Capsule v1 schema, which
// describes a capsule as a request better than its Go type (the bounds,
// the versions): the API checks a capsule against it.
var capsuleSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	s := new(jsonschema.Schema)
	if err := json.Unmarshal(capsule.SchemaJSON, s); err != nil {
		return nil, fmt.Errorf("the published capsule schema: %w", err)
	}
	return s, nil
})

// RequestSchema is the JSON Schema of an operation's request body (nil:
// it takes none), made from its Go type, a capsule's being the published
// one. The OpenAPI document describes the body with it, and a tool's input
// schema is made of it.
func RequestSchema(o ops.Op) (*jsonschema.Schema, error) {
	t := o.RequestType()
	switch t {
	case nil:
		return nil, nil
	case reflect.TypeFor[capsule.Capsule]():
		s, err := capsuleSchema()
		if err != nil {
			return nil, err
		}
		return s.CloneSchemas(), nil
	}
	return jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: TypeSchemas()})
}

// InputSchema is the input schema of an operation's tool: a closed object
// of agent (on an operation on one agent), the parameters the tool takes
// (each as its table entry says: type, bounds, summary) and the request
// body, whose properties are the request schema's own or, with BodyIn,
// one property that is the request schema.
func InputSchema(o ops.Op) (*jsonschema.Schema, error) {
	in := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	add := func(name string, s *jsonschema.Schema) error {
		if _, ok := in.Properties[name]; ok {
			return fmt.Errorf("the argument %q is given twice (a parameter and a field of the body?)", name)
		}
		in.Properties[name] = s
		in.PropertyOrder = append(in.PropertyOrder, name)
		return nil
	}
	names := o.MCP.Params
	if o.Agent {
		names = append([]string{"agent"}, names...)
	}
	for _, name := range names {
		i := slices.IndexFunc(o.Params, func(p ops.Param) bool { return p.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("the tool takes %q, which is no parameter of the operation", name)
		}
		if err := add(name, ParamSchema(o.Params[i])); err != nil {
			return nil, err
		}
	}
	body, err := RequestSchema(o)
	switch {
	case err != nil:
		return nil, err
	case body == nil && o.MCP.BodyIn != "":
		return nil, fmt.Errorf("the tool's body is the argument %q, and the operation takes none", o.MCP.BodyIn)
	case body == nil:
	case o.MCP.BodyIn != "":
		if err := add(o.MCP.BodyIn, body); err != nil {
			return nil, err
		}
		in.Required = append(in.Required, o.MCP.BodyIn)
	default:
		for _, name := range sortedProperties(body) {
			if err := add(name, body.Properties[name]); err != nil {
				return nil, err
			}
		}
		in.Required = append(in.Required, body.Required...)
	}
	return in, nil
}

// ParamSchema is a parameter's schema as a tool's argument: its JSON type
// (a boolean is true or false here, not a query's text), its bounds and
// its summary.
func ParamSchema(p ops.Param) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: p.Type, Description: p.Summary}
	if p.Type == "integer" {
		s.Minimum = jsonschema.Ptr(0.0)
		if p.Min != 0 || p.Max != 0 {
			s.Minimum, s.Maximum = jsonschema.Ptr(float64(p.Min)), jsonschema.Ptr(float64(p.Max))
		}
	}
	return s
}

// sortedProperties are a schema's properties in its own order, then the
// rest by name.
func sortedProperties(s *jsonschema.Schema) []string {
	names := slices.Clone(s.PropertyOrder)
	var rest []string
	for name := range s.Properties {
		if !slices.Contains(names, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}
