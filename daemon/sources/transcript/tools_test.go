package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// toolsOf feeds lines to a new Tracker and returns every edit and shell run
// the lines completed, in order, one line each: "Tool paths @time" or
// "shell Tool start..end".
func toolsOf(t *testing.T, f Format, lines [][]byte) []string {
	t.Helper()
	tr := NewTracker(f)
	var out []string
	for _, l := range lines {
		u, err := tr.Line(l)
		if err != nil || u.Tools == nil {
			continue
		}
		for _, e := range u.Tools.Edits {
			s := fmt.Sprintf("%s %s @%s", e.Tool, strings.Join(e.Paths, ","), e.At.Format("15:04:05.000"))
			if len(e.Refused) > 0 {
				s += " refused " + strings.Join(e.Refused, ";")
			}
			out = append(out, s)
		}
		for _, r := range u.Tools.Shells {
			out = append(out, fmt.Sprintf("shell %s %s..%s", r.Tool, r.Start.Format("15:04:05.000"), r.End.Format("15:04:05.000")))
		}
	}
	return out
}

// A real Claude Code session (v2.0.76) with no hook: its three Writes count
// once their results came back, at the result's time; its Bash calls are
// shell runs from call to result, a failed one too (a failing command may
// have changed files); its Reads are nothing.
func TestClaudeTranscriptTools(t *testing.T) {
	got := toolsOf(t, ClaudeCode, fixtureLines(t, "transcript-manual-compact-v2.0.76-fasthooks.jsonl"))
	want := []string{
		"shell Bash 19:18:34.422..19:18:34.728",
		"Write /workspace/hello_world.py @19:19:00.687",
		"shell Bash 19:19:44.021..19:19:44.970",
		"Write /workspace/number_generator.py @19:20:25.792",
		"Write /workspace/data.txt @19:20:26.285",
		"shell Bash 19:20:28.496..19:20:30.887",
		"shell Bash 19:20:29.004..19:20:31.821",
		"shell Bash 19:20:34.733..19:20:36.380",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The newer session (v2.1.39, trimmed) names Edits and Writes too; each
	// one whose result is in the file counts, none is made up.
	// (the trimming kept two Edits with their results, and one Bash).
	got = toolsOf(t, ClaudeCode, fixtureLines(t, "transcript-autocompact-opus46-v2.1.39.jsonl"))
	want = []string{
		"Edit /home/USER/projects/spotter-worktrees/spotter-gqc/lib/spotter_web/live/project_review_live.ex @21:16:56.852",
		"Edit /home/USER/projects/spotter-worktrees/spotter-gqc/test/spotter_web/live/project_review_live_test.exs @21:18:55.376",
		"shell Bash 21:19:14.670..21:19:18.342",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("v2.1.39 tools =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A failed edit (is_error) changed nothing; an edit whose result never
// comes is not claimed; a subagent's edit is the agent's too.
func TestClaudeTranscriptFailedEdit(t *testing.T) {
	lines := [][]byte{
		[]byte(`{"type":"assistant","timestamp":"2026-01-02T19:00:00.000Z","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Edit","input":{"file_path":"/w/a.go","old_string":"x","new_string":"y"}},{"type":"tool_use","id":"toolu_2","name":"MultiEdit","input":{"file_path":"/w/b.go","edits":[]}}]}}`),
		[]byte(`{"type":"user","timestamp":"2026-01-02T19:00:01.000Z","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"String to replace not found"},{"type":"tool_result","tool_use_id":"toolu_2","content":"ok"}]}}`),
		[]byte(`{"type":"assistant","isSidechain":true,"timestamp":"2026-01-02T19:00:02.000Z","message":{"content":[{"type":"tool_use","id":"toolu_3","name":"NotebookEdit","input":{"notebook_path":"/w/n.ipynb"}},{"type":"tool_use","id":"toolu_4","name":"Write","input":{"file_path":"/w/never.go"}}]}}`),
		[]byte(`{"type":"user","isSidechain":true,"timestamp":"2026-01-02T19:00:03.000Z","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_3","content":"ok"}]}}`),
		[]byte(`{"type":"assistant","timestamp":"2026-01-02T19:00:04.000Z","message":{"content":[{"type":"tool_use","id":"toolu_5","name":"Write","input":{"file_path":"/w/\u001b[2Jx.go"}}]}}`),
		[]byte(`{"type":"user","timestamp":"bad","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_5","content":"ok"}]}}`),
	}
	got := toolsOf(t, ClaudeCode, lines)
	want := []string{
		"MultiEdit /w/b.go @19:00:01.000",
		"NotebookEdit /w/n.ipynb @19:00:03.000",
		`Write  @00:00:00.000 refused a path with a control character: "/w/\033[2Jx.go"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Codex rollouts: a real apply_patch line (the sanitized v0.104 rollout's,
// whose input was redacted upstream, so it names nothing) and the same line
// with the patch of Codex's own apply-patch scenario 002; the drift
// catalog's patch_apply_end and its shell calls with their outputs.
func TestCodexRolloutTools(t *testing.T) {
	var patchLine []byte
	for _, l := range fixtureLines(t, "rollout-2026-02-23-v0.104.0-alpha.1-autocompact-sanitized.jsonl") {
		if bytes.Contains(l, []byte(`"name":"apply_patch"`)) {
			patchLine = l
			break
		}
	}
	if patchLine == nil {
		t.Fatal("no apply_patch line in the fixture")
	}
	if got := toolsOf(t, Codex, [][]byte{patchLine}); len(got) != 0 {
		t.Errorf("a redacted patch named %v", got)
	}
	var m map[string]any
	if err := json.Unmarshal(patchLine, &m); err != nil {
		t.Fatal(err)
	}
	m["payload"].(map[string]any)["input"] = "*** Begin Patch\n*** Add File: nested/new.txt\n+created\n*** Delete File: delete.txt\n*** Update File: modify.txt\n@@\n-line2\n+changed\n*** End Patch\n"
	withPatch, _ := json.Marshal(m)
	got := toolsOf(t, Codex, [][]byte{withPatch})
	if want := []string{"apply_patch nested/new.txt,delete.txt,modify.txt @09:49:24.370"}; !reflect.DeepEqual(got, want) {
		t.Errorf("apply_patch: %v, want %v", got, want)
	}

	got = toolsOf(t, Codex, fixtureLines(t, "rollout-schema-catalog-v0.146.0-agent-sessions.jsonl"))
	want := []string{
		"shell shell 10:48:56.000..10:48:56.000", // call-2: function_call, function_call_output
		"patch_apply_end /tmp/repo/a.txt @10:48:56.000",
		"shell shell 10:48:56.000..10:48:56.000", // call-1: custom_tool_call, custom_tool_call_output
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("catalog tools =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The real token-count rollout (v0.125) edits nothing that survived
	// its trimming: nothing is made up from its instructions' prose, which
	// names apply_patch.
	for _, s := range toolsOf(t, Codex, fixtureLines(t, "rollout-2026-05-11-v0.125.0-token-count.jsonl")) {
		if !strings.HasPrefix(s, "shell ") {
			t.Errorf("v0.125 rollout: %s", s)
		}
	}
}

// Older Codex versions applied patches through the shell tool.
func TestCodexShellApplyPatch(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-old content\n+new content\n*** End Patch\n"
	args := func(cmd []string) string {
		b, _ := json.Marshal(map[string]any{"command": cmd})
		s, _ := json.Marshal(string(b))
		return string(s)
	}
	lines := [][]byte{
		[]byte(`{"timestamp":"2025-09-01T10:00:00.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","call_id":"call_a","arguments":` + args([]string{"apply_patch", patch}) + `}}`),
		[]byte(`{"timestamp":"2025-09-01T10:00:01.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","call_id":"call_b","arguments":` + args([]string{"bash", "-lc", "apply_patch <<'EOF'\n" + patch + "EOF"}) + `}}`),
	}
	got := toolsOf(t, Codex, lines)
	want := []string{
		"apply_patch old/name.txt,renamed/dir/name.txt @10:00:00.000",
		"apply_patch old/name.txt,renamed/dir/name.txt @10:00:01.000",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
}

// Each transcript names the conversation's latest point: Claude Code's
// entry uuid, Codex's item id (0.146) or, before item ids, its turn id.
func TestLastMessageID(t *testing.T) {
	for file, want := range map[string]string{
		"transcript-manual-compact-v2.0.76-fasthooks.jsonl":               "5685c15e-81ef-48c0-902c-5acad440265a",
		"transcript-autocompact-opus46-v2.1.39.jsonl":                     "d3231929-5c7c-41e7-9d4d-ef12e6c9b880",
		"transcript-manual-compact-excerpt-v2.1.270-shepherd.jsonl":       "9bfa6d4d-1a84-41ac-8224-6b45e799e374",
		"rollout-2026-05-11-v0.125.0-token-count.jsonl":                   "019e162b-0011-7240-abbc-f7b732e49728",
		"rollout-2026-02-23-v0.104.0-alpha.1-autocompact-sanitized.jsonl": "019c8f8c-1cc1-7c11-8d86-fc93f07292b0",
		"rollout-schema-catalog-v0.146.0-agent-sessions.jsonl":            "msg-2", // later ids are "[trimmed for fixture]": not ids
	} {
		f := ClaudeCode
		if strings.HasPrefix(file, "rollout-") {
			f = Codex
		}
		tr := NewTracker(f)
		for _, l := range fixtureLines(t, file) {
			tr.Line(l)
		}
		if got := tr.State().LastMessageID; got != want {
			t.Errorf("%s: LastMessageID = %q, want %q", file, got, want)
		}
	}
}
