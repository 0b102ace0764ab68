package api_test

import (
	"strings"
	"testing"
)

// Every route that takes a body decodes it with the guard's strict decoder:
// a key given twice and a value of the wrong JSON type are refused with the
// API's error shape, naming the field, in words that never show a Go type.
func TestEveryBodyIsStrict(t *testing.T) {
	ta := newTestAPI(t)
	routes := []struct {
		method, path, field  string
		duplicate, wrongType string
	}{
		{"POST", "/v1/continuity/checkpoint", "focus", `{"focus":"a","focus":"b"}`, `{"focus":1}`},
		{"PUT", "/v1/capsule", "goal", `{"version":"1","goal":"a","goal":"b"}`, `{"version":"1","goal":1}`},
		{"POST", "/v1/capsule/seal", "goal", `{"goal":"a","goal":"b"}`, `{"goal":1}`},
		{"POST", "/v1/capsule/seal", "receipts", `{"receipts":["a"],"receipts":["b"]}`, `{"receipts":"a"}`},
		{"POST", "/v1/capsule/seal", "receipts[0]", `{"receipts":["a","b"],"goal":"g","goal":"h"}`, `{"receipts":[1]}`},
		{"POST", "/v1/signals", "kind", `{"kind":"context","kind":"context"}`, `{"kind":1}`},
		{"POST", "/v1/deadletter/retry", "upstream", `{"upstream":"local","upstream":"local"}`, `{"upstream":1}`},
		{"POST", "/v1/deadletter/discard", "seq", `{"upstream":"local","seq":1,"seq":2}`, `{"upstream":"local","seq":"1"}`},
		{"POST", "/v1/snapshots/latest/restore", "dry_run", `{"dry_run":true,"dry_run":false}`, `{"dry_run":"yes"}`},
	}
	for _, r := range routes {
		for _, c := range []struct{ what, body, field string }{
			{"duplicate key", r.duplicate, r.field},
			{"wrong type", r.wrongType, r.field},
		} {
			if c.what == "duplicate key" && r.field == "receipts[0]" {
				c.field = "goal" // the duplicate follows a valid array
			}
			status, _, v := ta.do(t, r.method, r.path, c.body)
			e, _ := v["error"].(map[string]any)
			code, _ := e["code"].(string)
			msg, _ := e["message"].(string)
			field, _ := e["field"].(string)
			if status != 400 || code == "" || msg == "" || field != c.field {
				t.Errorf("%s %s, %s %s: %d %v; want 400 with code, message and field %q", r.method, r.path, c.what, c.body, status, v, c.field)
			}
			for _, leak := range []string{"Go struct", "Go value", "unmarshal", "main.", "capsule.", "guard.", "agent.", "json:"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s %s, %s: the message shows Go's types (%q): %s", r.method, r.path, c.what, leak, msg)
				}
			}
		}
	}
}
