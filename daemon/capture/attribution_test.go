package capture

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// Two agents on one workdir, each with its capture and its real watcher,
// one ledger: a hook's edit claim credits its agent, a shell window its
// agent, a transcript's edit its agent, an unclaimed change goes to
// outside; each change is credited once although both agents are told of
// it by their shared watcher and both report it (the ledger keeps the
// first);
// a path both agents change is a conflict, told once, until one
// checkpoints; by_others names the others' changes.
func TestAttributionTwoAgentsOneWorkdir(t *testing.T) {
	ledger := attribution.New(attribution.Options{})
	var mu sync.Mutex
	var conflicts []attribution.Conflict
	onConflict := func(c attribution.Conflict) { mu.Lock(); conflicts = append(conflicts, c); mu.Unlock() }
	var shared watch.Shared
	ob := testOptions(t)
	ob.Attribution, ob.OnConflict, ob.Watches = ledger, onConflict, &shared
	or := testOptions(t)
	or.Agent, or.Workdir, or.Attribution, or.OnConflict, or.Watches = "reviewer", ob.Workdir, ledger, onConflict, &shared
	builder, reviewer := startCapture(t, ob), startCapture(t, or)
	wd := ob.Workdir

	edit := func(c *running, rel string) {
		c.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
			Tool: &capsule.SignalTool{Name: "Edit", Kind: capsule.ToolEdit, Paths: []string{filepath.Join(wd, rel)}, Cwd: wd}})
	}
	// Nobody's: before any tool ran.
	writeFile(t, filepath.Join(wd, "notes.md"), "by hand\n")
	waitCredit(t, ledger, "notes.md", "")
	edit(builder, "src/a.go")
	writeFile(t, filepath.Join(wd, "src", "a.go"), "package a\n")
	reviewer.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
		Tool: &capsule.SignalTool{Name: "Bash", Kind: capsule.ToolShellStart, ID: "toolu_sh", Cwd: wd}})
	writeFile(t, filepath.Join(wd, "gen", "out.txt"), "generated\n")
	waitCredit(t, ledger, "gen/out.txt", "reviewer")
	reviewer.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
		Tool: &capsule.SignalTool{Name: "Bash", Kind: capsule.ToolShellEnd, ID: "toolu_sh"}})
	waitCredit(t, ledger, "src/a.go", "builder")
	// A transcript's edit (no hook ran), relative to the session's cwd.
	reviewer.transcriptTools(&transcript.ToolCalls{Edits: []transcript.Edit{{Tool: "apply_patch", Paths: []string{"docs/b.md"}, At: time.Now()}}}, wd)
	writeFile(t, filepath.Join(wd, "docs", "b.md"), "# b\n")
	waitCredit(t, ledger, "docs/b.md", "reviewer")

	for _, c := range ledger.ChangesSince(time.Time{}) {
		n := 0
		for _, d := range ledger.ChangesSince(time.Time{}) {
			if d.Path == c.Path && d.By == c.By {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s by %q credited %d times (two watchers saw it), want once", c.Path, c.By, n)
		}
	}
	byOthers := builder.ByOthers()
	if !containsByOther(byOthers, "gen/out.txt", "agent:reviewer") || !containsByOther(byOthers, "docs/b.md", "agent:reviewer") ||
		!containsByOther(byOthers, "notes.md", "outside") || containsByOther(byOthers, "src/a.go", "agent") {
		t.Errorf("builder's by_others = %+v", byOthers)
	}

	// Both change src/a.go: a conflict, told once, listed for both.
	edit(reviewer, "src/a.go")
	writeFile(t, filepath.Join(wd, "src", "a.go"), "package a // reviewed\n")
	testwait.Until(t, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("a conflict on src/a.go; told %+v, builder lists %+v", conflicts, builder.Conflicts())
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(conflicts) == 1 && conflicts[0].Path == "src/a.go" && len(reviewer.Conflicts()) == 1 && len(builder.Conflicts()) == 1
	})
	builder.Checkpointed(time.Now())
	if got := reviewer.Conflicts(); len(got) != 0 {
		t.Errorf("after builder checkpointed past it, reviewer still lists %+v", got)
	}
}

// waitCredit waits until the ledger credits path to by ("" : outside).
func waitCredit(t *testing.T, l *attribution.Ledger, path, by string) {
	t.Helper()
	testwait.Until(t, func() string {
		return fmt.Sprintf("%s credited to %q; the ledger holds %+v", path, by, l.ChangesSince(time.Time{}))
	}, func() bool {
		for _, c := range l.ChangesSince(time.Time{}) {
			if c.Path == path && c.By == by {
				return true
			}
		}
		return false
	})
}

func containsByOther(bo []attribution.ByOther, path, by string) bool {
	for _, o := range bo {
		if o.Path == path && o.By == by {
			return true
		}
	}
	return false
}

// claudeEditLines are the real Edit call of the v2.1.39 transcript and its
// result, moved to now and to path: what Claude Code writes when it edits
// a file and no hook runs.
func claudeEditLines(t *testing.T, path string) string {
	t.Helper()
	var call, result map[string]any
	calls := map[string]map[string]any{} // tool_use id → its line
	for _, l := range strings.Split(string(readFixture(t, "transcript-autocompact-opus46-v2.1.39.jsonl")), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		msg, _ := m["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			blk, _ := b.(map[string]any)
			switch {
			case blk["type"] == "tool_use" && blk["name"] == "Edit":
				blk["input"].(map[string]any)["file_path"] = path
				calls[blk["id"].(string)] = m
			case result == nil && blk["type"] == "tool_result" && calls[fmt.Sprint(blk["tool_use_id"])] != nil:
				call, result = calls[fmt.Sprint(blk["tool_use_id"])], m
			}
		}
	}
	if call == nil || result == nil {
		t.Fatal("fixture changed: no Edit call with its result")
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	call["timestamp"], result["timestamp"] = now, now
	a, _ := json.Marshal(call)
	b, _ := json.Marshal(result)
	return string(a) + "\n" + string(b) + "\n"
}

// A Claude Code session with no hooks: its transcript's Edit (a real
// line), read by the follower while the real watcher sees the file
// change, credits the agent (transcript); the change a person makes
// beside it is outside.
func TestAttributionFromTranscriptWithoutHooks(t *testing.T) {
	o, proj := transcriptOptions(t)
	o.Watch.Enabled = true
	o.Attribution = attribution.New(attribution.Options{})
	path := filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, path, "")
	r := startCapture(t, o)
	testwait.Until(t, func() string { return "the transcript followed" }, func() bool {
		r.transcripts.mu.Lock()
		defer r.transcripts.mu.Unlock()
		return r.transcripts.path == path
	})
	appendFile(t, path, claudeEditLines(t, filepath.Join(o.Workdir, "lib", "review.ex")))
	writeFile(t, filepath.Join(o.Workdir, "lib", "review.ex"), "defmodule Review do\nend\n")
	waitCredit(t, o.Attribution, "lib/review.ex", "builder")
	if ch := o.Attribution.ChangesSince(time.Time{}); len(ch) != 1 || ch[0].Kind != attribution.KindTranscript {
		t.Errorf("changes = %+v, want lib/review.ex by builder from the transcript", ch)
	}
}

// A Codex session: its rollout's apply_patch (the real v0.104 line, its
// redacted input replaced by a patch of a file relative to the session's
// cwd, the workdir) credits the agent when the watcher sees the file
// change.
func TestAttributionFromCodexRolloutApplyPatch(t *testing.T) {
	o := testOptions(t)
	codex := filepath.Join(t.TempDir(), "codex")
	o.Transcripts = TranscriptOptions{Enabled: true, CodexHome: codex}
	o.Attribution = attribution.New(attribution.Options{})
	rollout, patchLine := codexRollout(t, codex, o.Workdir)
	r := startCapture(t, o)
	waitHealth(t, r.Capture, "ok: following "+rollout)
	appendFile(t, rollout, patchLine("src/codex.go"))
	writeFile(t, filepath.Join(o.Workdir, "src", "codex.go"), "package src\n")
	waitCredit(t, o.Attribution, "src/codex.go", "builder")
}

// codexRollout writes today's rollout of a Codex session in workdir under
// the Codex home codex: the real v0.104 session_meta line with its cwd
// set to workdir. patchLine is the real apply_patch line of that rollout,
// now, its redacted input replaced by a patch that adds rel (relative to
// the session's cwd).
func codexRollout(t *testing.T, codex, workdir string) (rollout string, patchLine func(rel string) string) {
	t.Helper()
	var meta, patch map[string]any
	for _, l := range strings.Split(string(readFixture(t, "rollout-2026-02-23-v0.104.0-alpha.1-autocompact-sanitized.jsonl")), "\n") {
		switch {
		case meta == nil && strings.Contains(l, `"type":"session_meta"`):
			json.Unmarshal([]byte(l), &meta)
		case patch == nil && strings.Contains(l, `"name":"apply_patch"`):
			json.Unmarshal([]byte(l), &patch)
		}
	}
	if meta == nil || patch == nil {
		t.Fatal("fixture changed: no session_meta or apply_patch line")
	}
	meta["payload"].(map[string]any)["cwd"] = workdir
	metaLine, _ := json.Marshal(meta)
	now := time.Now()
	rollout = filepath.Join(codex, "sessions", now.Format("2006"), now.Format("01"), now.Format("02"),
		"rollout-2026-02-23T11-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	writeFile(t, rollout, string(metaLine)+"\n")
	return rollout, func(rel string) string {
		patch["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
		patch["payload"].(map[string]any)["input"] = "*** Begin Patch\n*** Add File: " + rel + "\n+package src\n*** End Patch\n"
		line, _ := json.Marshal(patch)
		return string(line) + "\n"
	}
}

// A hook event spooled while the daemon was down is stored later: its
// tool call counts at the time the hook saw it (tool.at), not when the
// daemon took it, so it still explains the change it made.
func TestAttributionSpooledToolKeepsItsTime(t *testing.T) {
	o := testOptions(t)
	o.Attribution = attribution.New(attribution.Options{})
	r := newCapture(t, o)
	edited := time.Now().Add(-time.Hour)
	if _, err := o.Attribution.Burst(attribution.Burst{Paths: []string{"src/a.go"}, At: edited}); err != nil {
		t.Fatal(err)
	}
	r.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
		Tool: &capsule.SignalTool{Name: "Write", Kind: capsule.ToolEdit, Paths: []string{filepath.Join(o.Workdir, "src", "a.go")}, At: edited.Add(100 * time.Millisecond)}})
	if ch := o.Attribution.ChangesSince(time.Time{}); len(ch) != 1 || ch[0].By != "builder" {
		t.Fatalf("changes = %+v, want src/a.go credited to builder by the spooled claim", ch)
	}
}
