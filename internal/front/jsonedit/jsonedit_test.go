package jsonedit

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Value {
	t.Helper()
	v, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return v
}

// Parse agrees with encoding/json on what is JSON, and its values point
// at their own text.
func TestParse(t *testing.T) {
	src := `{"a": [1, -2.5e+3, true, null, "x\u00e9\"y"], "b": {}, "a": {"c": false}}`
	v := mustParse(t, src)
	if v.Kind != Object || len(v.Members) != 3 || v.Get("a").Kind != Object || v.Index("a") != 2 {
		t.Fatalf("members: %+v", v)
	}
	arr := v.Members[0].Value
	if arr.Kind != Array || len(arr.Elems) != 5 || arr.Elems[4].Str != `xé"y` || src[arr.Elems[1].Start:arr.Elems[1].End] != "-2.5e+3" {
		t.Fatalf("array: %+v", arr)
	}
	if src[v.Members[1].KeyStart:v.Members[1].KeyEnd] != `"b"` || src[v.Start:v.End] != src {
		t.Fatal("offsets")
	}
	for _, bad := range []string{``, `{`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `"\x"`, "\"a\nb\"", `tru`, `{} {}`, "\ufeff{}", `[1 2]`, `{"a":1 "b":2}`, `-`, `1e`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		} else if json.Valid([]byte(bad)) {
			t.Errorf("Parse(%q) refused what encoding/json accepts: %v", bad, err)
		}
	}
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	if _, err := Parse([]byte(deep)); err == nil {
		t.Error("no bound on nesting")
	}
}

// A refusal names the line and the column (in characters) where the text
// stops being JSON.
func TestSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
		msg       string
	}{
		{"{\n  \"a\": [\n    \"b\",\n  ]\n}", 3, 8, "trailing comma"},
		{"{\n  \"é\": 1,\n  \"b\" 2\n}", 3, 7, "want ':'"},
		{"{\"a\": 1}\n//x", 2, 1, "after the document"},
		{"{\"a\": \"\t\"}", 1, 8, "control character"},
	} {
		_, err := Parse([]byte(tc.src))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != tc.line || se.Col != tc.col || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("Parse(%q) = %v, want line %d column %d: …%s…", tc.src, err, tc.line, tc.col, tc.msg)
		}
	}
}

var group = Obj{{"matcher", "Bash"}, {"hooks", []any{Obj{{"type", "command"}, {"command", "x <y> & z"}, {"timeout", 2}}}}}

// Inserting writes like the file around it; removing what was inserted
// gives back the file's bytes.
func TestAppendRemoveRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"two spaces", "{\n  \"a\": 1\n}\n",
			"{\n  \"a\": 1,\n  \"g\": {\n    \"matcher\": \"Bash\",\n    \"hooks\": [\n      {\n        \"type\": \"command\",\n        \"command\": \"x <y> & z\",\n        \"timeout\": 2\n      }\n    ]\n  }\n}\n"},
		{"four spaces, no final newline", "{\n    \"a\": 1\n}",
			"{\n    \"a\": 1,\n    \"g\": {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n            {\n                \"type\": \"command\",\n                \"command\": \"x <y> & z\",\n                \"timeout\": 2\n            }\n        ]\n    }\n}"},
		{"tabs", "{\n\t\"a\": 1\n}\n",
			"{\n\t\"a\": 1,\n\t\"g\": {\n\t\t\"matcher\": \"Bash\",\n\t\t\"hooks\": [\n\t\t\t{\n\t\t\t\t\"type\": \"command\",\n\t\t\t\t\"command\": \"x <y> & z\",\n\t\t\t\t\"timeout\": 2\n\t\t\t}\n\t\t]\n\t}\n}\n"},
		{"one line", `{"a":1}`, `{"a":1,"g":{"matcher":"Bash","hooks":[{"type":"command","command":"x <y> & z","timeout":2}]}}`},
		{"one line with spaces", `{"a": 1, "b": 2}`, `{"a": 1, "b": 2, "g": {"matcher": "Bash", "hooks": [{"type": "command", "command": "x <y> & z", "timeout": 2}]}}`},
		{"empty", "{}\n", "{\n  \"g\": {\n    \"matcher\": \"Bash\",\n    \"hooks\": [\n      {\n        \"type\": \"command\",\n        \"command\": \"x <y> & z\",\n        \"timeout\": 2\n      }\n    ]\n  }\n}\n"},
		{"crlf", "{\r\n  \"a\": 1\r\n}\r\n",
			"{\r\n  \"a\": 1,\r\n  \"g\": {\r\n    \"matcher\": \"Bash\",\r\n    \"hooks\": [\r\n      {\r\n        \"type\": \"command\",\r\n        \"command\": \"x <y> & z\",\r\n        \"timeout\": 2\r\n      }\r\n    ]\r\n  }\r\n}\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := mustParse(t, tc.src)
			out, err := AppendMember([]byte(tc.src), root, "g", group)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("inserted:\n%s\nwant:\n%s", out, tc.want)
			}
			root = mustParse(t, string(out))
			back := RemoveMember(out, root, root.Index("g"))
			if string(back) != tc.src {
				t.Fatalf("removed:\n%q\nwant:\n%q", back, tc.src)
			}
		})
	}
}

// Elements go in and out of arrays the same way, and a member in the
// middle of an object leaves with its own comma.
func TestElemsAndMiddleMembers(t *testing.T) {
	src := "{\n  \"hooks\": {\n    \"Stop\": [\n      {\"hooks\": []}\n    ],\n    \"x\": []\n  }\n}\n"
	root := mustParse(t, src)
	stop := root.Get("hooks").Get("Stop")
	out, err := AppendElem([]byte(src), stop, Obj{{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"hooks\": {\n    \"Stop\": [\n      {\"hooks\": []},\n      {\n        \"a\": \"b\"\n      }\n    ],\n    \"x\": []\n  }\n}\n"
	if string(out) != want {
		t.Fatalf("appended:\n%s", out)
	}
	root = mustParse(t, string(out))
	if back := RemoveElem(out, root.Get("hooks").Get("Stop"), 1); string(back) != src {
		t.Fatalf("removed:\n%s", back)
	}
	// Into the empty array x, then out again.
	root = mustParse(t, src)
	out, _ = AppendElem([]byte(src), root.Get("hooks").Get("x"), "y")
	if !strings.Contains(string(out), "\"x\": [\n      \"y\"\n    ]\n") {
		t.Fatalf("into []:\n%s", out)
	}
	root = mustParse(t, string(out))
	if back := RemoveElem(out, root.Get("hooks").Get("x"), 0); string(back) != src {
		t.Fatalf("out of [y]:\n%s", back)
	}
	// The first of two members, and the first of two elements.
	root = mustParse(t, src)
	h := root.Get("hooks")
	if got := string(RemoveMember([]byte(src), h, 0)); got != "{\n  \"hooks\": {\n    \"x\": []\n  }\n}\n" {
		t.Fatalf("first member: %q", got)
	}
	two := `[1, 2]`
	if got := string(RemoveElem([]byte(two), mustParse(t, two), 0)); got != `[2]` {
		t.Fatalf("first element: %q", got)
	}
}

func TestReplaceString(t *testing.T) {
	src := `{"statusLine": {"type": "command", "command": "a", "padding": 0}}`
	v := mustParse(t, src).Get("statusLine").Get("command")
	out := ReplaceString([]byte(src), v, `x 'y' "z" <&>`)
	var got struct{ StatusLine map[string]any }
	if err := json.Unmarshal(out, &got); err != nil || got.StatusLine["command"] != `x 'y' "z" <&>` || !reflect.DeepEqual(got.StatusLine["padding"], 0.0) {
		t.Fatalf("%s: %v %+v", out, err, got)
	}
	if !IsEmptyObject([]byte(" {\n}\n")) || IsEmptyObject([]byte(`{"a":1}`)) || IsEmptyObject([]byte(`[]`)) {
		t.Fatal("IsEmptyObject")
	}
}
