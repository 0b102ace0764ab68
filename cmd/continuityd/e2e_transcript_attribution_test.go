package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// agentFixture is a file of testdata/agents (NOTE.md says where each
// comes from), as lines.
func agentFixture(t *testing.T, rel string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
}

// jsonLine decodes a fixture line, lets set change it and encodes it.
func jsonLine(t *testing.T, line string, set func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	set(m)
	out, _ := json.Marshal(m)
	return string(out) + "\n"
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// transcriptFollowed is what agent's transcript follower says in status
// ("ok: following PATH", …).
func transcriptFollowed(t *testing.T, c *http.Client, agent string) string {
	t.Helper()
	for _, a := range asList(get(t, c, "/v1/status")["agents"]) {
		am, _ := a.(map[string]any)
		if am["name"] != agent {
			continue
		}
		for _, comp := range asList(am["components"]) {
			cm, _ := comp.(map[string]any)
			if cm["name"] == "transcripts" {
				return fmt.Sprintf("%v: %v", cm["state"], cm["detail"])
			}
		}
	}
	return ""
}

// TestTranscriptOnlyAttributionTwoKinds: two agents of one daemon on one
// workdir, neither with hooks: "claude" is a Claude Code session
// (transcript = "claude-code") whose transcript lies in the test's Claude
// home, "codex" a Codex session (transcript = "codex") whose rollout,
// newer, lies in the test's Codex home. Each follows its own (not the
// workdir's newest, which would be the rollout for both). Real lines are
// appended as the agents would write them: the Claude transcript's Edit
// call and its result, the rollout's apply_patch; and each file is
// changed on disk as the tool would. Each agent's resume names the other's
// path in since_last_visit.by_others, credited to the right agent, never
// its own; a restore of claude's own paths puts back its file and leaves
// codex's, naming whose it is.
func TestTranscriptOnlyAttributionTwoKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	claudeHome, codexHome := filepath.Join(w.dir, "claude"), filepath.Join(w.dir, "codex")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[watch]\nquiet = \"100ms\"\n\n"+
		"[transcripts]\nclaude_home = %q\ncodex_home = %q\n\n"+
		"[[agent]]\nname = \"claude\"\nworkdir = %q\ntranscript = \"claude-code\"\n\n"+
		"[[agent]]\nname = \"codex\"\nworkdir = %q\ntranscript = \"codex\"\n",
		w.state, w.socket, claudeHome, codexHome, work, work)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	userGit(t, work, "init", "-q", "-b", "main")
	before := map[string]string{"src/claude.go": "package src // 1\n", "src/codex.go": "package src // 1\n"}
	for rel, content := range before {
		writeFile(t, work, rel, content)
	}
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-qm", "start")

	// The Claude Code session so far (a real one: its history is not
	// news), then the Codex session, which is newer.
	session := filepath.Join(transcript.ClaudeProjectDir(claudeHome, work), "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, filepath.Dir(session), filepath.Base(session), strings.Join(agentFixture(t, "claude-code/transcript-short-session-v2.1.38.jsonl"), "\n")+"\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(session, old, old); err != nil {
		t.Fatal(err)
	}
	rolloutLines := agentFixture(t, "codex/rollout-apply-patch-v0.104.0.jsonl")
	now := time.Now()
	rollout := filepath.Join(codexHome, "sessions", now.Format("2006"), now.Format("01"), now.Format("02"),
		"rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	writeFile(t, filepath.Dir(rollout), filepath.Base(rollout), jsonLine(t, rolloutLines[0], func(m map[string]any) {
		m["payload"].(map[string]any)["cwd"] = work
	}))

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	for agent, file := range map[string]string{"claude": session, "codex": rollout} {
		var got string
		waitUntil(t, func() string {
			return fmt.Sprintf("%s following %s; status says %q; log:\n%s", agent, file, got, p.stderr)
		},
			func() bool { got = transcriptFollowed(t, c, agent); return got == "ok: following "+file })
	}
	var ids []string
	waitUntil(t, func() string { return fmt.Sprintf("claude's start snapshot (%v); log:\n%s", ids, p.stderr) },
		func() bool { ids = agentSnapshots(t, c, "claude"); return len(ids) >= 1 })
	start := ids[len(ids)-1]

	// Claude Code's Edit: the call and its result, then the file.
	appendClaudeEdit(t, session, filepath.Join(work, "src", "claude.go"))
	writeFile(t, work, "src/claude.go", "package src // 2, claude's edit\n")

	// Codex's apply_patch (relative to the session's cwd), then the file.
	appendTo(t, rollout, jsonLine(t, rolloutLines[1], func(m map[string]any) {
		m["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
		m["payload"].(map[string]any)["input"] = "*** Begin Patch\n*** Update File: src/codex.go\n@@\n-package src // 1\n+package src // 2, codex's patch\n*** End Patch\n"
	}))
	writeFile(t, work, "src/codex.go", "package src // 2, codex's patch\n")

	for agent, want := range map[string]string{"claude": "src/codex.go agent:codex", "codex": "src/claude.go agent:claude"} {
		var got []string
		waitUntil(t, func() string {
			return fmt.Sprintf("%s's by_others to hold %q; it holds %q; log:\n%s", agent, want, got, p.stderr)
		},
			func() bool { got = byOthers(t, c, agent); return hasAll(got, want) })
		for _, o := range got {
			if o != want {
				t.Errorf("%s's by_others holds %q besides %q", agent, o, want)
			}
		}
	}

	// Claude's own paths: its file comes back, codex's is left alone.
	code, out, errs := cli(t, env, "", "snapshot", "restore", start, "--agent", "claude")
	if code != 0 || !strings.Contains(out, "restore src/claude.go\n") || strings.Contains(out, "restore src/codex.go") ||
		!strings.Contains(out, "left alone src/codex.go: changed by agent:codex\n") {
		t.Fatalf("claude's restore of its own files (exit %d):\n%s%s", code, out, errs)
	}
	if got := readFile(t, work, "src/claude.go"); got != before["src/claude.go"] {
		t.Errorf("after claude's restore, src/claude.go is %q", got)
	}
	if got := readFile(t, work, "src/codex.go"); got != "package src // 2, codex's patch\n" {
		t.Errorf("claude's restore of its own files changed codex's src/codex.go: %q", got)
	}
}

// TestTranscriptBoundByHookOnSharedWorkdir: two agents of one daemon on
// one workdir, both following "auto" (the default), the workdir with a
// Claude Code session and a newer Codex rollout. Each follows one, never
// the same one (one transcript, one agent). Then the agent that follows
// the rollout sends a real UserPromptSubmit hook naming the Claude Code
// session as its transcript_path: the session is its own from then on,
// the other agent lets go of it and takes the rollout, and the session's
// Edit line credits the hook's agent in the other's by_others.
func TestTranscriptBoundByHookOnSharedWorkdir(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := attributionWorkspace(t)
	claudeHome, codexHome := filepath.Join(w.dir, "claude"), filepath.Join(w.dir, "codex")
	session := filepath.Join(transcript.ClaudeProjectDir(claudeHome, work), "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, filepath.Dir(session), filepath.Base(session), strings.Join(agentFixture(t, "claude-code/transcript-short-session-v2.1.38.jsonl"), "\n")+"\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(session, old, old); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rollout := filepath.Join(codexHome, "sessions", now.Format("2006"), now.Format("01"), now.Format("02"),
		"rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	writeFile(t, filepath.Dir(rollout), filepath.Base(rollout), jsonLine(t, agentFixture(t, "codex/rollout-apply-patch-v0.104.0.jsonl")[0], func(m map[string]any) {
		m["payload"].(map[string]any)["cwd"] = work
	}))

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	follows := map[string]string{}
	waitUntil(t, func() string {
		return fmt.Sprintf("each agent following its own transcript; status says %q; log:\n%s", follows, p.stderr)
	},
		func() bool {
			for _, a := range []string{"builder", "reviewer"} {
				follows[a] = transcriptFollowed(t, c, a)
			}
			b, r := follows["builder"], follows["reviewer"]
			return strings.HasPrefix(b, "ok: following ") && strings.HasPrefix(r, "ok: following ") && b != r
		})
	hooked, other := "builder", "reviewer"
	if follows["reviewer"] == "ok: following "+rollout {
		hooked, other = other, hooked
	}

	payload := hookPayload(t, "input-userpromptsubmit.json", func(m map[string]any) {
		m["cwd"], m["transcript_path"] = work, session
	})
	if code, out, errs := cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, payload, "hook", "--agent", hooked); code != 0 || out != "" {
		t.Fatalf("hook --agent %s: exit %d, out %q, err %s", hooked, code, out, errs)
	}
	waitUntil(t, func() string {
		return fmt.Sprintf("%s on the session its hook named and %s, let go, on the rollout; status says %q and %q; log:\n%s",
			hooked, other, transcriptFollowed(t, c, hooked), transcriptFollowed(t, c, other), p.stderr)
	}, func() bool {
		return transcriptFollowed(t, c, hooked) == "ok: following "+session && transcriptFollowed(t, c, other) == "ok: following "+rollout
	})

	appendClaudeEdit(t, session, filepath.Join(work, "src", "claude.go"))
	writeFile(t, work, "src/claude.go", "package src\n")
	want := "src/claude.go agent:" + hooked
	var got []string
	waitUntil(t, func() string { return fmt.Sprintf("%s's by_others to hold %q; it holds %q", other, want, got) },
		func() bool { got = byOthers(t, c, other); return hasAll(got, want) })
	for _, o := range byOthers(t, c, hooked) {
		if strings.HasPrefix(o, "src/claude.go ") {
			t.Errorf("%s's by_others names its own edit: %q", hooked, o)
		}
	}
}

// appendClaudeEdit appends to a Claude Code session the real Edit call and
// its result (transcript-edit-call-v2.1.39.jsonl), stamped now, editing
// file: what Claude Code writes when its Edit tool changes file.
func appendClaudeEdit(t *testing.T, session, file string) {
	t.Helper()
	stamp := func(m map[string]any) { m["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano) }
	edit := agentFixture(t, "claude-code/transcript-edit-call-v2.1.39.jsonl")
	appendTo(t, session, jsonLine(t, edit[0], func(m map[string]any) {
		stamp(m)
		for _, b := range m["message"].(map[string]any)["content"].([]any) {
			if blk := b.(map[string]any); blk["type"] == "tool_use" && blk["name"] == "Edit" {
				blk["input"].(map[string]any)["file_path"] = file
			}
		}
	})+jsonLine(t, edit[1], stamp))
}
