package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJournalEntriesCarrySessionAndTurn: the versions an agent makes
// carry the session and the turn they were made in, as its real hooks'
// payloads (UserPromptSubmit, PostToolUse) told them; a second turn's
// version names the second turn; a person's version names neither, and
// `history` prints them, its `by` as before.
func TestJournalEntriesCarrySessionAndTurn(t *testing.T) {
	t.Parallel()
	w, work := turnsWorkspace(t)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	hook := turnHook(t, env, work)
	session := func(id string) func(m map[string]any) { return func(m map[string]any) { m["session_id"] = id } }

	// A turn: its prompt, then the agent's Write and its PostToolUse.
	turn := func(content string) (from, to time.Time) {
		from = time.Now()
		hook("input-userpromptsubmit.json", session("sess-one"))
		to = time.Now()
		writeFile(t, work, "main.go", content)
		hook("input-posttooluse-write.json", func(m map[string]any) {
			m["session_id"] = "sess-one"
			m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, "main.go")
			m["tool_input"].(map[string]any)["content"] = content
		})
		return from, to
	}
	first := "package main\n\nfunc main() { println(1) }\n"
	from1, to1 := turn(first)
	v1 := waitVersion(t, env, work, "main.go", first, "agent")
	if v1.Session != "sess-one" || v1.Turn == nil || v1.Turn.Before(from1.Add(-time.Second)) || v1.Turn.After(to1.Add(time.Second)) {
		t.Fatalf("the first turn's version says session %q, turn %v; want sess-one and a turn begun between %s and %s", v1.Session, v1.Turn, from1, to1)
	}
	hook("input-stop.json", session("sess-one"))

	second := "package main\n\nfunc main() { println(2) }\n"
	from2, to2 := turn(second)
	v2 := waitVersion(t, env, work, "main.go", second, "agent")
	if v2.Session != "sess-one" || v2.Turn == nil || v2.Turn.Before(from2.Add(-time.Second)) || v2.Turn.After(to2.Add(time.Second)) || !v2.Turn.After(*v1.Turn) {
		t.Fatalf("the second turn's version says session %q, turn %v; want sess-one and a turn begun between %s and %s, after the first's %s", v2.Session, v2.Turn, from2, to2, v1.Turn)
	}

	// A person's file: outside, no session, no turn.
	writeFile(t, work, "notes.txt", "a person's notes\n")
	if v := waitVersion(t, env, work, "notes.txt", "a person's notes\n", "outside"); v.Session != "" || v.Turn != nil {
		t.Fatalf("a person's version says session %q, turn %v", v.Session, v.Turn)
	}

	code, out, errOut := cli(t, env, "", "history", filepath.Join(work, "main.go"))
	want := v2.ID + "  "
	line := ""
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, want) {
			line = l
		}
	}
	if code != 0 || !strings.Contains(line, "by agent  session sess-one  turn of "+v2.Turn.Local().Format("15:04:05")) {
		t.Fatalf("history main.go: exit %d, the second version's line %q does not name its session and turn:\n%s%s", code, line, out, errOut)
	}
}
