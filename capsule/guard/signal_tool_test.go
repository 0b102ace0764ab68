package guard

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// toolSig wraps a tool object in an activity signal of event tool.
func toolSig(tool string) string { return `{"kind":"activity","event":"tool","tool":` + tool + `}` }

func TestDecodeSignalTool(t *testing.T) {
	const code = capsule.CodeInvalidSignal
	manyPaths := make([]string, MaxToolPaths+1)
	for i := range manyPaths {
		manyPaths[i] = `"f"`
	}
	cases := []bodyCase{
		{"edit", toolSig(`{"name":"Edit","kind":"edit","id":"toolu_01","paths":["/w/a.go"],"cwd":"/w","at":"2026-12-01T10:00:00.5Z"}`), "", ""},
		{"apply_patch relative", toolSig(`{"name":"apply_patch","kind":"edit","paths":["src/a.go","b.go"],"cwd":"/w"}`), "", ""},
		{"notebook", toolSig(`{"name":"NotebookEdit","kind":"edit","paths":["/w/n.ipynb"]}`), "", ""},
		{"shell start", toolSig(`{"name":"Bash","kind":"shell_start","id":"toolu_02","cwd":"/w"}`), "", ""},
		{"shell end", toolSig(`{"name":"Bash","kind":"shell_end","id":"toolu_02"}`), "", ""},
		{"tool on another kind", `{"kind":"session","event":"start","tool":{"name":"Bash","kind":"shell_start"}}`, code, "tool"},
		{"tool on prompt activity", `{"kind":"activity","event":"prompt","tool":{"name":"Bash","kind":"shell_start"}}`, code, "tool"},
		{"tool not an object", toolSig(`["Edit"]`), code, "tool"},
		{"unknown member", toolSig(`{"name":"Edit","kind":"edit","paths":["a"],"content":"x"}`), code, "tool.content"},
		{"no name", toolSig(`{"kind":"edit","paths":["a"]}`), code, "tool.name"},
		{"no kind", toolSig(`{"name":"Edit","paths":["a"]}`), code, "tool.kind"},
		{"bad kind", toolSig(`{"name":"Edit","kind":"write","paths":["a"]}`), code, "tool.kind"},
		{"unknown tool", toolSig(`{"name":"Read","kind":"edit","paths":["a"]}`), code, "tool.name"},
		{"edit tool as shell", toolSig(`{"name":"Edit","kind":"shell_start"}`), code, "tool.name"},
		{"shell tool as edit", toolSig(`{"name":"Bash","kind":"edit","paths":["a"]}`), code, "tool.name"},
		{"edit without paths", toolSig(`{"name":"Write","kind":"edit"}`), code, "tool.paths"},
		{"shell with paths", toolSig(`{"name":"Bash","kind":"shell_end","paths":["a"]}`), code, "tool.paths"},
		{"path with a control character", toolSig(`{"name":"Edit","kind":"edit","paths":["a\u001b[31m"]}`), code, "tool.paths[0]"},
		{"path with a line break", toolSig(`{"name":"Edit","kind":"edit","paths":["ok","a\nb"]}`), code, "tool.paths[1]"},
		{"path empty", toolSig(`{"name":"Edit","kind":"edit","paths":[""]}`), code, "tool.paths[0]"},
		{"path too long", toolSig(`{"name":"Edit","kind":"edit","paths":["` + strings.Repeat("a", 4097) + `"]}`), code, "tool.paths[0]"},
		{"path not a string", toolSig(`{"name":"Edit","kind":"edit","paths":[1]}`), code, "tool.paths[0]"},
		{"too many paths", toolSig(`{"name":"apply_patch","kind":"edit","paths":[` + strings.Join(manyPaths, ",") + `]}`), code, "tool.paths"},
		{"cwd relative", toolSig(`{"name":"Bash","kind":"shell_start","cwd":"w"}`), code, "tool.cwd"},
		{"cwd control", toolSig(`{"name":"Bash","kind":"shell_start","cwd":"/w\u0007"}`), code, "tool.cwd"},
		{"id with a space", toolSig(`{"name":"Bash","kind":"shell_start","id":"a b"}`), code, "tool.id"},
		{"id too long", toolSig(`{"name":"Bash","kind":"shell_start","id":"` + strings.Repeat("a", MaxToolID+1) + `"}`), code, "tool.id"},
		{"at not a time", toolSig(`{"name":"Bash","kind":"shell_start","at":"yesterday"}`), code, "tool.at"},
	}
	g := testGuard(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.DecodeSignal([]byte(tc.body))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefusal(t, err, tc.code, tc.field)
			checkGuardError(t, err)
		})
	}
}

func TestDecodeSignalToolResult(t *testing.T) {
	g := testGuard(t)
	secret := "sk-" + fake(601, alnum, 48)
	s, err := g.DecodeSignal([]byte(toolSig(`{"name":"Write","kind":"edit","id":"toolu_9","paths":["/w/a.go","/w/` + secret + `.txt"],"cwd":"/w","at":"2026-12-01T10:00:00.5Z"}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := &capsule.SignalTool{Name: "Write", Kind: capsule.ToolEdit, ID: "toolu_9", Paths: []string{"/w/a.go", "/w/" + g.Redact(secret) + ".txt"},
		Cwd: "/w", At: time.Date(2026, 12, 1, 10, 0, 0, 5e8, time.UTC)}
	if !reflect.DeepEqual(s.Tool, want) {
		t.Fatalf("got %s, want %s", js(s.Tool), js(want))
	}
	if strings.Contains(js(s), secret) {
		t.Fatalf("the secret in a path was kept: %s", js(s))
	}
}
