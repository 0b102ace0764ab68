package openapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/continuityd/continuityd/internal/daemonside/openapi"
)

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type note struct {
	Text string          `json:"text"`
	Tags []string        `json:"tags,omitempty"`
	Raw  json.RawMessage `json:"raw,omitempty"`
	When stamp           `json:"when,omitzero"`
}

// stamp is a struct whose JSON (as its MarshalJSON would write it) is a
// number, which its Go shape does not say.
type stamp struct{ Sec, Nsec int64 }

func info() openapi.Info {
	return openapi.Info{
		Title: "notes", Version: "1", ErrorBody: apiError{},
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[stamp](): {Type: "integer"}},
	}
}

func ops() []openapi.Operation {
	return []openapi.Operation{
		{ID: "getNote", Method: "GET", Path: "/notes/{id}", Answer: note{}, Errors: []int{404, 400}},
		{ID: "putNote", Method: "PUT", Path: "/notes/{id}", Request: note{}, Answer: note{}, Errors: []int{400}},
	}
}

// decode returns the document as generic JSON.
func decode(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return m
}

// get follows a path of keys through generic JSON.
func get(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("at %q: not an object: %v", k, v)
		}
		v = m[k]
	}
	return v
}

func TestDocumentDescribesOperations(t *testing.T) {
	doc, err := openapi.Document(info(), ops())
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, doc)
	if v := get(t, m, "openapi"); v != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", v)
	}
	get404 := get(t, m, "paths", "/notes/{id}", "get", "responses", "404", "content", "application/json", "schema", "$ref")
	if get404 != "#/components/schemas/Error" {
		t.Errorf("a refusal's schema is %v, want the shared Error component", get404)
	}
	if get(t, m, "components", "schemas", "Error", "properties", "error") == nil {
		t.Errorf("the Error component is not the error body's shape: %v", get(t, m, "components", "schemas", "Error"))
	}
	params, _ := get(t, m, "paths", "/notes/{id}", "get", "parameters").([]any)
	if len(params) != 1 || get(t, params[0], "in") != "path" || get(t, params[0], "name") != "id" {
		t.Errorf("parameters = %v, want the path parameter id", params)
	}
	body := get(t, m, "paths", "/notes/{id}", "put", "requestBody", "content", "application/json", "schema")
	if get(t, body, "properties", "when", "type") != "integer" {
		t.Errorf("a caller's type schema was not used: when = %v", get(t, body, "properties", "when"))
	}
	if raw := get(t, body, "properties", "raw"); raw != true {
		t.Errorf("json.RawMessage should be any JSON (the schema true), got %v", raw)
	}
	if req, _ := get(t, body, "required").([]any); len(req) != 1 || req[0] != "text" {
		t.Errorf("required = %v, want [text] (the fields without omitempty)", req)
	}
	again, err := openapi.Document(info(), ops())
	if err != nil || string(again) != string(doc) {
		t.Errorf("the same input gave different documents (err %v)", err)
	}
}

func TestDocumentRefusesBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		info openapi.Info
		ops  []openapi.Operation
		want string
	}{
		"no error body":   {openapi.Info{Title: "x"}, ops(), "ErrorBody"},
		"twice":           {info(), append(ops(), ops()[0]), "declared twice"},
		"no answer":       {info(), []openapi.Operation{{ID: "x", Method: "GET", Path: "/x"}}, "no answer"},
		"2xx as an error": {info(), []openapi.Operation{{ID: "x", Method: "GET", Path: "/x", Answer: note{}, Errors: []int{204}}}, "204"},
		"func type":       {info(), []openapi.Operation{{ID: "x", Method: "GET", Path: "/x", Answer: func() {}}}, "answer"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := openapi.Document(tc.info, tc.ops)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}
