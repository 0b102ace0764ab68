package api_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/ops"
)

// strictCases are, for each operation of the table that takes a body, a
// key given twice and a value of the wrong JSON type in bodies the
// operation would otherwise take, and the field its refusal names. An
// operation with a body that has none here fails the test: a new body is
// proven strict when it is added.
var strictCases = map[string][]struct {
	field, duplicate, wrongType string
}{
	"checkpoint":  {{"focus", `{"focus":"a","focus":"b"}`, `{"focus":1}`}},
	"capsule_put": {{"goal", `{"version":"1","goal":"a","goal":"b"}`, `{"version":"1","goal":1}`}},
	"capsule_seal": {
		{"goal", `{"goal":"a","goal":"b"}`, `{"goal":1}`},
		{"receipts", `{"receipts":["a"],"receipts":["b"]}`, `{"receipts":"a"}`},
		{"receipts[0]", `{"receipts":["a","b"],"goal":"g","goal":"h"}`, `{"receipts":[1]}`},
	},
	"signal":             {{"kind", `{"kind":"context","kind":"context"}`, `{"kind":1}`}},
	"deadletter_retry":   {{"upstream", `{"upstream":"local","upstream":"local"}`, `{"upstream":1}`}},
	"deadletter_discard": {{"seq", `{"upstream":"local","seq":1,"seq":2}`, `{"upstream":"local","seq":"1"}`}},
	"snapshot_take":      {{"message", `{"message":"a","message":"b"}`, `{"message":1}`}},
	"snapshot_restore":   {{"dry_run", `{"dry_run":true,"dry_run":false}`, `{"dry_run":"yes"}`}},
	"work_lost_restore":  {{"dry_run", `{"dry_run":true,"dry_run":false}`, `{"dry_run":"yes"}`}},
	"history_restore":    {{"dry_run", `{"path":"a","at":"5m","dry_run":true,"dry_run":false}`, `{"path":"a","at":"5m","dry_run":"yes"}`}},
}

// target is a request target for o: {id} is "latest".
func target(o ops.Op) string {
	return strings.ReplaceAll(o.Path, "{id}", "latest")
}

// Every operation of the table that takes a body decodes it with the
// guard's strict decoder: a key given twice and a value of the wrong JSON
// type are refused with the API's error shape, naming the field, in words
// that never show a Go type.
func TestEveryBodyIsStrict(t *testing.T) {
	ta := newTestAPI(t)
	bodies := 0
	for _, o := range ops.Table() {
		if o.Request == nil {
			continue
		}
		bodies++
		cases, ok := strictCases[o.Name]
		if !ok {
			t.Errorf("%s (%s) takes a body and has no case here: add a duplicate key and a wrong type", o.Name, o.Pattern())
			continue
		}
		for _, r := range cases {
			for _, c := range []struct{ what, body, field string }{
				{"duplicate key", r.duplicate, r.field},
				{"wrong type", r.wrongType, r.field},
			} {
				if c.what == "duplicate key" && r.field == "receipts[0]" {
					c.field = "goal" // the duplicate follows a valid array
				}
				status, _, v := ta.do(t, o.Method, target(o), c.body)
				checkRefusal(t, o, c.what+" "+c.body, status, v, c.field)
			}
		}
	}
	if bodies < len(strictCases) {
		t.Errorf("%d operations take a body, %d have cases: a case names an operation that is gone", bodies, len(strictCases))
	}
}

// Every field of every body, given a value of the wrong JSON type, is
// refused with the API's error shape and no Go type names; given twice, it
// is refused too. The fields are the request type's own (its json tags),
// so a field added to a body is covered when it is added.
func TestEveryBodyFieldIsStrict(t *testing.T) {
	ta := newTestAPI(t)
	for _, o := range ops.Table() {
		if o.Request == nil {
			continue
		}
		for _, f := range jsonFields(o.RequestType()) {
			if f.wrong == "" {
				continue // any JSON value is this field's (ttl_days: the schema's to judge)
			}
			body := `{"` + f.name + `":` + f.wrong + `}`
			status, _, v := ta.do(t, o.Method, target(o), body)
			checkRefusal(t, o, "wrong type "+body, status, v, "")
			body = `{"` + f.name + `":` + f.valid + `,"` + f.name + `":` + f.valid + `}`
			status, _, v = ta.do(t, o.Method, target(o), body)
			checkRefusal(t, o, "duplicate key "+body, status, v, "")
		}
	}
}

// checkRefusal checks a 400 in the API's error shape (with field, when
// given) whose message shows no Go type.
func checkRefusal(t *testing.T, o ops.Op, what string, status int, v map[string]any, wantField string) {
	t.Helper()
	e, _ := v["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	field, _ := e["field"].(string)
	if status != 400 || code == "" || msg == "" || (wantField != "" && field != wantField) {
		t.Errorf("%s %s, %s: %d %v; want 400 with code, message and field %q", o.Method, o.Path, what, status, v, wantField)
	}
	for _, leak := range []string{"Go struct", "Go value", "unmarshal", "main.", "capsule.", "guard.", "agent.", "json:", "struct {", "*string", "[]string", "int64", "float64", "uint64"} {
		if strings.Contains(msg, leak) {
			t.Errorf("%s %s, %s: the message shows Go's types (%q): %s", o.Method, o.Path, what, leak, msg)
		}
	}
}

// bodyField is a request body's field with a value of its JSON type and
// one of another.
type bodyField struct{ name, valid, wrong string }

var rawMessage = reflect.TypeFor[json.RawMessage]()

// jsonFields are the top-level JSON fields of a request type.
func jsonFields(rt reflect.Type) []bodyField {
	var out []bodyField
	for i := range rt.NumField() {
		sf := rt.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		f := bodyField{name: name}
		switch {
		case ft == rawMessage:
		case ft.Kind() == reflect.String:
			f.valid, f.wrong = `"a"`, `1`
		case ft.Kind() == reflect.Bool:
			f.valid, f.wrong = `true`, `"yes"`
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Float64:
			f.valid, f.wrong = `1`, `"1"`
		case ft.Kind() == reflect.Slice:
			f.valid, f.wrong = `[]`, `"a"`
		case ft.Kind() == reflect.Struct, ft.Kind() == reflect.Map:
			f.valid, f.wrong = `{}`, `1`
		}
		out = append(out, f)
	}
	return out
}
