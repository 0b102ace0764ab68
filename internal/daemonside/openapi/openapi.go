// Package openapi writes the OpenAPI 3.1 description of an HTTP JSON API
// from a list of its operations and the Go types of their bodies, so the
// document follows the code instead of being kept beside it by hand.
// Schemas are derived with github.com/google/jsonschema-go (JSON Schema
// 2020-12, OpenAPI 3.1's own dialect); the API's error shape is one shared
// component every refusal refers to.
package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Operation is one operation of the API as the document describes it.
type Operation struct {
	// ID is the operationId (a client generator's method name); Method and
	// Path the route, with {name} for a path parameter (a string).
	ID, Method, Path string
	Summary          string
	Query            []Param
	// Request is the zero value of the body's Go type, a *jsonschema.Schema
	// used as it is, or nil for an operation that takes no body.
	// RequestOptional says an empty body is accepted too. A field the body
	// may leave out is one its Go field tags omitempty.
	Request         any
	RequestOptional bool
	// Answer is the 200 answer: the zero value of its Go type, a
	// *jsonschema.Schema, or OneOf. AnswerType is its media type;
	// "" is application/json.
	Answer     any
	AnswerType string
	// Errors are the statuses the operation may refuse with, each with
	// the API's error shape (Info.ErrorBody).
	Errors []int
}

// Param is a query parameter.
type Param struct {
	Name, Description string
	Required          bool
	// Schema is the value's schema; nil is any string.
	Schema *jsonschema.Schema
}

// OneOf is an answer that is exactly one of several shapes (each the zero
// value of a Go type or a *jsonschema.Schema).
type OneOf []any

// Info describes the API as a whole.
type Info struct {
	Title, Version, Description string
	// ErrorBody is the zero value of the Go type of every refusal's body:
	// the shared component "Error".
	ErrorBody any
	// BearerAuth, when set, describes a listener that needs a bearer
	// token beside one that needs none: each operation takes either.
	BearerAuth string
	// TypeSchemas are the schemas of the caller's types whose JSON is not
	// their Go shape (those with a MarshalJSON or MarshalText).
	TypeSchemas map[reflect.Type]*jsonschema.Schema
}

// ErrorComponent is the name of the error shape among the components.
const ErrorComponent = "Error"

// Document returns the OpenAPI 3.1 document, as indented JSON, of the API
// info describes with ops. Paths and statuses are sorted, so the same
// input gives the same bytes (the document is kept in the repository and
// compared).
func Document(info Info, ops []Operation) ([]byte, error) {
	if info.ErrorBody == nil {
		return nil, errors.New("openapi: Info.ErrorBody is required: every refusal refers to it")
	}
	g := generator{types: typeSchemas(info.TypeSchemas)}
	errSchema, err := g.schemaFor(info.ErrorBody)
	if err != nil {
		return nil, fmt.Errorf("openapi: the error body: %w", err)
	}
	doc := document{
		OpenAPI:           "3.1.0",
		JSONSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
		Info:              infoObject{Title: info.Title, Version: info.Version, Description: info.Description},
		Paths:             map[string]map[string]*operation{},
		Components:        components{Schemas: map[string]*jsonschema.Schema{ErrorComponent: errSchema}},
	}
	if info.BearerAuth != "" {
		doc.Components.SecuritySchemes = map[string]securityScheme{
			"bearer": {Type: "http", Scheme: "bearer", Description: info.BearerAuth},
		}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		key := op.Method + " " + op.Path
		if seen[op.ID] || seen[key] {
			return nil, fmt.Errorf("openapi: operation %s (%s) is declared twice", op.ID, key)
		}
		seen[op.ID], seen[key] = true, true
		o, err := g.operationObject(op, info.BearerAuth != "")
		if err != nil {
			return nil, fmt.Errorf("openapi: operation %s (%s): %w", op.ID, key, err)
		}
		if doc.Paths[op.Path] == nil {
			doc.Paths[op.Path] = map[string]*operation{}
		}
		doc.Paths[op.Path][strings.ToLower(op.Method)] = o
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return buf.Bytes(), nil
}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// generator makes the schemas of one document.
type generator struct {
	types map[reflect.Type]*jsonschema.Schema
}

func (g generator) operationObject(op Operation, bearer bool) (*operation, error) {
	if op.ID == "" || op.Method == "" || !strings.HasPrefix(op.Path, "/") {
		return nil, errors.New("an operation needs an ID, a method and a path")
	}
	o := &operation{OperationID: op.ID, Summary: op.Summary, Responses: map[string]*response{}}
	if bearer {
		o.Security = []map[string][]string{{}, {"bearer": {}}}
	}
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		o.Parameters = append(o.Parameters, parameter{Name: m[1], In: "path", Required: true, Schema: &jsonschema.Schema{Type: "string"}})
	}
	for _, p := range op.Query {
		s := p.Schema
		if s == nil {
			s = &jsonschema.Schema{Type: "string"}
		}
		o.Parameters = append(o.Parameters, parameter{Name: p.Name, In: "query", Description: p.Description, Required: p.Required, Schema: s})
	}
	if op.Request != nil {
		s, err := g.schemaOf(op.Request)
		if err != nil {
			return nil, fmt.Errorf("request: %w", err)
		}
		o.RequestBody = &requestBody{Required: !op.RequestOptional, Content: map[string]mediaType{"application/json": {Schema: s}}}
	}
	if op.Answer == nil {
		return nil, errors.New("no answer: every operation answers 200 with something")
	}
	s, err := g.schemaOf(op.Answer)
	if err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	mt := op.AnswerType
	if mt == "" {
		mt = "application/json"
	}
	o.Responses["200"] = &response{Description: "OK", Content: map[string]mediaType{mt: {Schema: s}}}
	for _, code := range slices.Sorted(slices.Values(op.Errors)) {
		if code < 400 || code > 599 {
			return nil, fmt.Errorf("error status %d is not a 4xx or 5xx", code)
		}
		o.Responses[strconv.Itoa(code)] = &response{
			Description: http.StatusText(code) + ": a refusal, in the API's error shape",
			Content:     map[string]mediaType{"application/json": {Schema: &jsonschema.Schema{Ref: "#/components/schemas/" + ErrorComponent}}},
		}
	}
	return o, nil
}

func (g generator) schemaOf(v any) (*jsonschema.Schema, error) {
	switch v := v.(type) {
	case *jsonschema.Schema:
		return v.CloneSchemas(), nil
	case OneOf:
		s := &jsonschema.Schema{}
		for _, alt := range v {
			as, err := g.schemaOf(alt)
			if err != nil {
				return nil, err
			}
			s.OneOf = append(s.OneOf, as)
		}
		return s, nil
	}
	return g.schemaFor(v)
}

// schemaFor is the JSON Schema of the JSON encoding/json makes of v's
// type. Types whose JSON is not what their Go shape says are described
// as they encode: json.RawMessage is any JSON; the caller's own are in
// Info.TypeSchemas.
func (g generator) schemaFor(v any) (*jsonschema.Schema, error) {
	return jsonschema.ForType(reflect.TypeOf(v), &jsonschema.ForOptions{TypeSchemas: g.types})
}

// typeSchemas adds the standard library's types whose Go shape is not
// their JSON to the caller's.
func typeSchemas(callers map[reflect.Type]*jsonschema.Schema) map[reflect.Type]*jsonschema.Schema {
	m := map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}
	for t, s := range callers {
		m[t] = s
	}
	return m
}

// The document's objects, in the order OpenAPI lists their fields.
type document struct {
	OpenAPI           string                           `json:"openapi"`
	Info              infoObject                       `json:"info"`
	JSONSchemaDialect string                           `json:"jsonSchemaDialect"`
	Paths             map[string]map[string]*operation `json:"paths"`
	Components        components                       `json:"components"`
}

type infoObject struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

type components struct {
	Schemas         map[string]*jsonschema.Schema `json:"schemas"`
	SecuritySchemes map[string]securityScheme     `json:"securitySchemes,omitempty"`
}

type securityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme"`
	Description string `json:"description,omitempty"`
}

type operation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary,omitempty"`
	Parameters  []parameter           `json:"parameters,omitempty"`
	RequestBody *requestBody          `json:"requestBody,omitempty"`
	Responses   map[string]*response  `json:"responses"`
	Security    []map[string][]string `json:"security,omitempty"`
}

type parameter struct {
	Name        string             `json:"name"`
	In          string             `json:"in"`
	Description string             `json:"description,omitempty"`
	Required    bool               `json:"required,omitempty"`
	Schema      *jsonschema.Schema `json:"schema"`
}

type requestBody struct {
	Required bool                 `json:"required"`
	Content  map[string]mediaType `json:"content"`
}

type response struct {
	Description string               `json:"description"`
	Content     map[string]mediaType `json:"content,omitempty"`
}

type mediaType struct {
	Schema *jsonschema.Schema `json:"schema"`
}
