package ops

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// Every endpoint declared in the package is in the table, once: one
// `endpoint[...](...)` declaration per entry, names unique.
func TestEveryEndpointIsInTheTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if ix, ok := call.Fun.(*ast.IndexListExpr); ok {
				if id, ok := ix.X.(*ast.Ident); ok && id.Name == "endpoint" {
					declared++
				}
			}
			return true
		})
	}
	table := Table()
	if declared != len(table) {
		t.Errorf("%d endpoints are declared, the table lists %d: list each in Table once", declared, len(table))
	}
	names := map[string]bool{}
	for _, o := range table {
		if names[o.Name] {
			t.Errorf("operation %s is in the table twice", o.Name)
		}
		names[o.Name] = true
	}
}

// The table is well formed: one entry per method, path and When; a second
// answer shares its route with a first; each path parameter is declared;
// each error code is one the API knows (it has a status); a body's
// operation says what the body is; tools and CLI commands are unique.
func TestTableIsWellFormed(t *testing.T) {
	routes := map[string]string{}
	tools := map[string]string{}
	commands := map[string]string{}
	namePattern := regexp.MustCompile(`^[a-z][a-z_]*$`)
	for _, o := range Table() {
		if !namePattern.MatchString(o.Name) || o.Summary == "" || !strings.HasPrefix(o.Path, "/") {
			t.Errorf("%s: a name of lower case words, a summary and a path are required: %+v", o.Name, o)
		}
		key := o.Pattern() + "?" + o.When
		if other, ok := routes[key]; ok {
			t.Errorf("%s and %s are both %s", o.Name, other, key)
		}
		routes[key] = o.Name
		for _, seg := range regexp.MustCompile(`\{([a-z_]+)\}`).FindAllStringSubmatch(o.Path, -1) {
			if !slices.ContainsFunc(o.Params, func(p Param) bool { return p.Name == seg[1] && p.In == "path" }) {
				t.Errorf("%s: the path's {%s} is not among its parameters", o.Name, seg[1])
			}
		}
		seen := map[string]bool{}
		for _, p := range o.Params {
			if seen[p.Name] || (p.In != "query" && p.In != "path") || !slices.Contains([]string{"boolean", "integer", "string"}, p.Type) || p.Summary == "" {
				t.Errorf("%s: parameter %+v (given twice, or not query/path of boolean/integer/string with a summary)", o.Name, p)
			}
			seen[p.Name] = true
		}
		if o.Agent && (!seen["agent"] || !seen["cwd"]) {
			t.Errorf("%s acts on one agent but does not take agent and cwd", o.Name)
		}
		for _, code := range o.Errors {
			if capsule.StatusOf(code) == 0 {
				t.Errorf("%s: error code %s has no status: not one the API answers", o.Name, code)
			}
		}
		if (o.Method == http.MethodGet || o.Method == http.MethodDelete) && o.Request != nil {
			t.Errorf("%s: a %s with a body", o.Name, o.Method)
		}
		if o.Answer != nil && o.AnswerMedia != "application/json" {
			t.Errorf("%s: answer %T as %q", o.Name, o.Answer, o.AnswerMedia)
		}
		if o.MCP != nil {
			if other, ok := tools[o.MCP.Name]; ok {
				t.Errorf("%s and %s are both the tool %s", o.Name, other, o.MCP.Name)
			}
			tools[o.MCP.Name] = o.Name
			for _, name := range o.MCP.Params {
				if !seen[name] || name == "agent" {
					t.Errorf("%s: its tool takes %q, which is not one of its parameters (agent comes with every tool on one agent)", o.Name, name)
				}
			}
			if o.MCP.Name == "" || o.MCP.Title == "" || o.MCP.Description == "" || (o.MCP.BodyIn != "" && o.Request == nil) {
				t.Errorf("%s: its tool needs a name, a title and a description, and a body to put in %q", o.Name, o.MCP.BodyIn)
			}
		}
		for _, c := range o.CLI {
			if other, ok := commands[c]; ok {
				t.Errorf("%s and %s are both the command %q", o.Name, other, c)
			}
			commands[c] = o.Name
		}
	}
	for _, o := range Table() {
		if o.When != "" && !slices.ContainsFunc(Table(), func(p Op) bool { return p.When == "" && p.Pattern() == o.Pattern() }) {
			t.Errorf("%s is a second answer (%s) of %s, which no first answer serves", o.Name, o.When, o.Pattern())
		}
	}
}

// A call's request: the path's id escaped, the second answer's query
// added, and a caller's mistake (a parameter the operation does not take,
// a missing id, a body where none goes) refused before anything is sent.
func TestRoute(t *testing.T) {
	method, path, q, err := SnapshotDiff.Route(Args{ID: "a/b c", Query: url.Values{"against": {"x"}, "agent": {"builder"}}})
	if err != nil || method != http.MethodGet || path != "/v1/snapshots/a%2Fb%20c" || q.Encode() != "against=x&agent=builder&diff=1" {
		t.Errorf("snapshot diff: %s %s ? %s, %v", method, path, q.Encode(), err)
	}
	for what, err := range map[string]error{
		"an unknown parameter": func() error { _, _, _, err := Resume.Route(Args{Query: url.Values{"peak": {"1"}}}); return err }(),
		"no id":                func() error { _, _, _, err := SnapshotShow.Route(Args{}); return err }(),
		"an id it does not take": func() error {
			_, _, _, err := Status.Route(Args{ID: "x"})
			return err
		}(),
		"a body where none goes": func() error { _, _, _, err := Resume.Route(Args{Body: []byte(`{}`)}); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}

// What a call waits by design: a long poll its max_seconds (the default
// when not given or not a number, at most an hour), a synced checkpoint
// the upstreams' 10 s, anything else nothing.
func TestWaits(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		q    url.Values
		want time.Duration
	}{
		{Status.Op(), nil, 0},
		{Checkpoint.Op(), url.Values{}, 0},
		{Checkpoint.Op(), url.Values{"sync": {"1"}}, syncWait},
		{Wait.Op(), url.Values{}, 20 * time.Second},
		{Wait.Op(), url.Values{"max_seconds": {"90"}}, 90 * time.Second},
		{Wait.Op(), url.Values{"max_seconds": {"junk"}}, 20 * time.Second},
		{Wait.Op(), url.Values{"max_seconds": {"99999"}}, time.Hour},
	} {
		if got := tc.op.Waits(tc.q); got != tc.want {
			t.Errorf("%s?%s: %v, want %v", tc.op.Name, tc.q.Encode(), got, tc.want)
		}
	}
}

// An answer that is not the operation's is an error that says so, never a
// zero value taken for an answer.
func TestDecodeRefusesAForeignAnswer(t *testing.T) {
	if _, err := Checkpoint.Decode([]byte(`{"seq":"one"}`)); err == nil || !strings.Contains(err.Error(), "POST /v1/continuity/checkpoint") {
		t.Errorf("a foreign answer: %v", err)
	}
	if ans, err := Checkpoint.Decode([]byte(`{"seq":7,"state":{}}`)); err != nil || ans.Seq != 7 {
		t.Errorf("an answer: %+v, %v", ans, err)
	}
}

// A call on one snapshot may fetch it from the fleet first: the client
// waits as long as the daemon may fetch (it was cut at the ordinary
// answer's bound, with nothing said, on a loaded machine).
func TestSnapshotCallsWaitForAFleetFetch(t *testing.T) {
	for _, e := range []Op{SnapshotShow.Op(), SnapshotDiff.Op(), SnapshotRestore.Op()} {
		if got := e.Waits(url.Values{}); got < FleetFetchTimeout {
			t.Errorf("%s waits %v, less than a fleet fetch may take (%v)", e.Name, got, FleetFetchTimeout)
		}
	}
}
