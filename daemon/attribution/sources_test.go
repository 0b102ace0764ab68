package attribution_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/hook"
)

// The parts together, as the daemon will wire them, on real payloads: two
// agents on one workdir (a Claude Code agent with hooks, a Codex agent
// without, read from its rollout) and a person editing beside them.

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	return out
}

// hookEvent parses a documented payload of the hooks reference with its
// tool input and cwd set for this workdir.
func hookEvent(t *testing.T, file, cwd string, set map[string]any) *hook.Event {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join("..", "..", "internal", "hook", "testdata", "claude-code", file)), &m); err != nil {
		t.Fatal(err)
	}
	m["cwd"] = cwd
	for k, v := range set {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	e, err := hook.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func rels(t *testing.T, r *attribution.Resolver, cwd string, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		rel, err := r.Rel(cwd, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, rel)
	}
	return out
}

func TestTwoAgentsFromRealPayloads(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := attribution.NewResolver(work)
	if err != nil {
		t.Fatal(err)
	}
	l := attribution.New(attribution.Options{})
	ok := func(res attribution.Result, err error) attribution.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// The Codex agent, "reviewer": a real rollout line of apply_patch (its
	// input redacted upstream, here the patch of Codex's scenario 002).
	var patchLine []byte
	for _, ln := range lines(t, filepath.Join("..", "sources", "transcript", "testdata", "rollout-2026-02-23-v0.104.0-alpha.1-autocompact-sanitized.jsonl")) {
		if bytes.Contains(ln, []byte(`"name":"apply_patch"`)) {
			patchLine = ln
			break
		}
	}
	var m map[string]any
	if err := json.Unmarshal(patchLine, &m); err != nil {
		t.Fatal(err)
	}
	m["payload"].(map[string]any)["input"] = "*** Begin Patch\n*** Add File: nested/new.txt\n+created\n*** Delete File: delete.txt\n*** Update File: modify.txt\n@@\n-line2\n+changed\n*** End Patch\n"
	patchLine, _ = json.Marshal(m)
	tr := transcript.NewTracker(transcript.Codex)
	u, err := tr.Line(patchLine)
	if err != nil || u.Tools == nil || len(u.Tools.Edits) != 1 {
		t.Fatalf("the rollout line: %+v, %v", u, err)
	}
	edit := u.Tools.Edits[0]
	t0 := edit.At // the rollout's own clock: 2026-02-24T09:49:24.370Z
	ok(l.Tool(attribution.ToolEvent{Agent: "reviewer", Kind: attribution.KindTranscript, Paths: rels(t, r, work, edit.Paths), At: edit.At}))

	// The Claude Code agent, "builder": PostToolUse Write, and a Bash call.
	w := hookEvent(t, "input-posttooluse-write.json", work, map[string]any{"tool_input": map[string]any{"file_path": filepath.Join(work, "src", "a.go"), "content": "x"}})
	ok(l.Tool(attribution.ToolEvent{Agent: "builder", Kind: attribution.KindEdit, Paths: rels(t, r, w.Cwd, w.Tool.Paths), At: t0}))
	pre := hookEvent(t, "input-pretooluse-common-fields.json", work, nil)
	ok(l.ShellStart("builder", pre.Tool.ID, t0.Add(10*time.Second)))

	// The watcher: the patch's and the Write's files, then what changed
	// while builder's shell ran (whoever wrote it: a window cannot tell).
	res := ok(l.Burst(attribution.Burst{Paths: []string{"nested/new.txt", "delete.txt", "modify.txt", "src/a.go"}, At: t0.Add(time.Second)}))
	res2 := ok(l.Burst(attribution.Burst{Paths: []string{"gen/out.go"}, At: t0.Add(11 * time.Second)}))
	post := hookEvent(t, "input-pretooluse-common-fields.json", work, map[string]any{"hook_event_name": "PostToolUse"})
	ok(l.ShellEnd("builder", post.Tool.ID, t0.Add(12*time.Second)))
	// Later, a person edits the README: nobody's tool ran.
	res3 := ok(l.Burst(attribution.Burst{Paths: []string{"README.md"}, At: t0.Add(time.Minute)}))

	got := map[string]string{}
	for _, rr := range []attribution.Result{res, res2, res3} {
		for _, c := range rr.Credits {
			got[c.Path] = c.By + "/" + c.Kind
		}
	}
	want := map[string]string{
		"nested/new.txt": "reviewer/transcript", "delete.txt": "reviewer/transcript", "modify.txt": "reviewer/transcript",
		"src/a.go": "builder/edit", "gen/out.go": "builder/shell", "README.md": "/outside",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("credits = %v\nwant %v", got, want)
	}

	// builder now edits modify.txt too: a conflict told to both.
	w = hookEvent(t, "input-posttooluse-write.json", work, map[string]any{"tool_input": map[string]any{"file_path": "modify.txt"}})
	ok(l.Tool(attribution.ToolEvent{Agent: "builder", Kind: attribution.KindEdit, Paths: rels(t, r, w.Cwd, w.Tool.Paths), At: t0.Add(2 * time.Minute)}))
	res = ok(l.Burst(attribution.Burst{Paths: []string{"modify.txt"}, At: t0.Add(2 * time.Minute)}))
	if len(res.Conflicts) != 1 || !reflect.DeepEqual(res.Conflicts[0].Agents, []string{"builder", "reviewer"}) {
		t.Errorf("conflicts = %+v", res.Conflicts)
	}
	// What the reviewer finds when it comes back, named its way.
	wantBy := []attribution.ByOther{{Path: "README.md", By: "outside"}, {Path: "gen/out.go", By: "agent:builder"},
		{Path: "modify.txt", By: "agent:builder"}, {Path: "src/a.go", By: "agent:builder"}}
	if got := l.ByOthers("reviewer"); !reflect.DeepEqual(got, wantBy) {
		t.Errorf("ByOthers(reviewer) = %v\nwant %v", got, wantBy)
	}
	// What builder's restore without --path may touch: its own paths only.
	if got := l.ChangedBy("builder", t0); !reflect.DeepEqual(got, []string{"gen/out.go", "modify.txt", "src/a.go"}) {
		t.Errorf("ChangedBy(builder) = %v", got)
	}
}

// A Claude Code session without hooks (the real v2.0.76 transcript,
// cwd /workspace): its Writes are credited from the transcript, at the
// times it records, and its Bash runs as shell windows.
func TestClaudeTranscriptWithoutHooks(t *testing.T) {
	r, err := attribution.NewResolver("/workspace")
	if err != nil {
		t.Fatal(err)
	}
	l := attribution.New(attribution.Options{})
	tr := transcript.NewTracker(transcript.ClaudeCode)
	for _, ln := range lines(t, filepath.Join("..", "sources", "transcript", "testdata", "transcript-manual-compact-v2.0.76-fasthooks.jsonl")) {
		u, err := tr.Line(ln)
		if err != nil || u.Tools == nil {
			continue
		}
		for _, e := range u.Tools.Edits {
			if _, err := l.Tool(attribution.ToolEvent{Agent: "solo", Kind: attribution.KindTranscript, Paths: rels(t, r, "/workspace", e.Paths), At: e.At}); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range u.Tools.Shells {
			if _, err := l.ShellStart("solo", s.Start.String(), s.Start); err != nil {
				t.Fatal(err)
			}
			if _, err := l.ShellEnd("solo", s.Start.String(), s.End); err != nil {
				t.Fatal(err)
			}
		}
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	got := map[string]string{}
	for _, b := range []attribution.Burst{
		{Paths: []string{"hello_world.py"}, At: at("2026-01-02T19:19:00.500Z")},
		{Paths: []string{"number_generator.py", "data.txt"}, At: at("2026-01-02T19:20:26.000Z")},
		{Paths: []string{"__pycache__/x.pyc"}, At: at("2026-01-02T19:20:35.000Z")}, // python3 ran then
		{Paths: []string{"notes.txt"}, At: at("2026-01-02T19:25:00.000Z")},
	} {
		res, err := l.Burst(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Credits {
			got[c.Path] = c.By + "/" + c.Kind
		}
	}
	want := map[string]string{
		"hello_world.py": "solo/transcript", "number_generator.py": "solo/transcript", "data.txt": "solo/transcript",
		"__pycache__/x.pyc": "solo/shell", "notes.txt": "/outside",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("credits = %v\nwant %v", got, want)
	}
}
