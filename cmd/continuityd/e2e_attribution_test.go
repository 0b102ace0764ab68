package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// attributionWorkspace is a daemon config with two agents, builder and
// reviewer, on ONE workdir (a real git repository), the watcher quick to
// report, and transcripts looked for only in empty homes of the test's.
func attributionWorkspace(t *testing.T) (*workspace, string) {
	t.Helper()
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[watch]\nquiet = \"100ms\"\n\n"+
		"[transcripts]\nclaude_home = %q\ncodex_home = %q\n\n"+
		"[[agent]]\nname = \"builder\"\nworkdir = %q\n\n[[agent]]\nname = \"reviewer\"\nworkdir = %q\n",
		w.state, w.socket, filepath.Join(w.dir, "claude"), filepath.Join(w.dir, "codex"), work, work)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	userGit(t, work, "init", "-q", "-b", "main")
	writeFile(t, work, "README.md", "the project\n")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-qm", "start")
	return w, work
}

// hookPayload is a real hook payload of testdata/agents (NOTE.md) with the
// fields that place it in the test's workdir set.
func hookPayload(t *testing.T, file string, set func(m map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-code", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	set(m)
	out, _ := json.Marshal(m)
	return string(out)
}

// byOthers is an agent's since_last_visit.by_others (a peek: its own
// visit is not counted), as "path by" strings.
func byOthers(t *testing.T, c *http.Client, agent string) []string {
	t.Helper()
	r := get(t, c, "/v1/continuity?peek=1&local=1&agent="+agent)
	slv, _ := r["since_last_visit"].(map[string]any)
	var out []string
	for _, o := range asList(slv["by_others"]) {
		m, _ := o.(map[string]any)
		out = append(out, fmt.Sprintf("%v %v", m["path"], m["by"]))
	}
	return out
}

func hasAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestAttributionTwoAgentsOneWorkdir: two agents of one daemon on one
// workdir (real git, the real watcher, real hook payloads through
// `continuityd hook`): a change nobody claimed is outside; builder's
// PostToolUse Write credits builder; what changes between reviewer's
// PreToolUse and PostToolUse of Bash is reviewer's; each agent's
// by_others names the other's and the outside changes, never its own;
// a path both change is a conflict on both wait feeds and in both
// resumes, until one checkpoints past it.
func TestAttributionTwoAgentsOneWorkdir(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := attributionWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	cursors := map[string]any{}
	for _, a := range []string{"builder", "reviewer"} {
		cursors[a] = get(t, c, "/v1/continuity/wait?max_seconds=1&agent="+a)["cursor"]
	}
	hook := func(agent, payload string) {
		t.Helper()
		if code, out, errs := cli(t, env, payload, "hook", "--agent", agent); code != 0 || out != "" {
			t.Fatalf("hook --agent %s: exit %d, out %q, err %s", agent, code, out, errs)
		}
	}
	// edit writes a file as an agent's Write tool and sends its
	// PostToolUse; hookFirst sends it before the write (the ledger matches
	// a claim and a change in either order within its slack; the test
	// picks the order where another agent's recent claim on the same path
	// must not win the race with the watcher).
	edit := func(agent, rel, content string, hookFirst bool) {
		t.Helper()
		payload := hookPayload(t, "input-posttooluse-write.json", func(m map[string]any) {
			m["cwd"] = work
			m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, rel)
		})
		if hookFirst {
			hook(agent, payload)
		}
		writeFile(t, work, rel, content)
		if !hookFirst {
			hook(agent, payload)
		}
	}
	shell := func(agent, event, id string) {
		t.Helper()
		hook(agent, hookPayload(t, "input-pretooluse-common-fields.json", func(m map[string]any) {
			m["cwd"], m["hook_event_name"], m["tool_use_id"] = work, event, id
		}))
	}
	waitByOthers := func(agent string, want ...string) {
		t.Helper()
		var got []string
		waitUntil(t, func() string { return fmt.Sprintf("%s's by_others to hold %q; it holds %q", agent, want, got) },
			func() bool { got = byOthers(t, c, agent); return hasAll(got, want...) })
	}

	// Outside: a person's edit, no tool running.
	writeFile(t, work, "notes.md", "by hand\n")
	waitByOthers("builder", "notes.md outside")
	waitByOthers("reviewer", "notes.md outside")

	// Builder's edit tool (PostToolUse Write).
	edit("builder", "src/a.go", "package a\n", false)
	waitByOthers("reviewer", "src/a.go agent:builder")

	// Reviewer's shell window (PreToolUse … PostToolUse Bash): what its
	// command wrote is its own.
	shell("reviewer", "PreToolUse", "toolu_e2e_shell")
	writeFile(t, work, "gen/out.txt", "generated\n")
	waitByOthers("builder", "gen/out.txt agent:reviewer")
	shell("reviewer", "PostToolUse", "toolu_e2e_shell")

	for agent, own := range map[string]string{"builder": "src/a.go", "reviewer": "gen/out.txt"} {
		for _, o := range byOthers(t, c, agent) {
			if strings.HasPrefix(o, own+" ") || strings.HasSuffix(o, " agent") {
				t.Errorf("%s's by_others names its own change: %q", agent, o)
			}
		}
	}
	if got := byOthers(t, c, "builder"); hasAll(got, "src/a.go outside") || hasAll(got, "gen/out.txt outside") {
		t.Errorf("a claimed change is also outside: %q", got)
	}

	// Reviewer edits builder's file: a conflict, told to both.
	edit("reviewer", "src/a.go", "package a // reviewed\n", true)
	for _, agent := range []string{"builder", "reviewer"} {
		var seen []any
		waitUntil(t, func() string {
			return fmt.Sprintf("a conflict event on %s's wait feed; saw %v; by_others %q / %q, conflicts %v / %v", agent, seen,
				byOthers(t, c, "builder"), byOthers(t, c, "reviewer"),
				get(t, c, "/v1/continuity?peek=1&local=1&agent=builder")["conflicts"], get(t, c, "/v1/continuity?peek=1&local=1&agent=reviewer")["conflicts"])
		}, func() bool {
			ans := get(t, c, fmt.Sprintf("/v1/continuity/wait?max_seconds=2&agent=%s&after=%v", agent, cursors[agent]))
			cursors[agent] = ans["cursor"]
			for _, e := range asList(ans["events"]) {
				m, _ := e.(map[string]any)
				seen = append(seen, m["kind"])
				if d, _ := m["data"].(map[string]any); m["kind"] == "conflict" && d["path"] == "src/a.go" {
					return true
				}
			}
			return false
		})
		r := get(t, c, "/v1/continuity?peek=1&local=1&agent="+agent)
		cs := asList(r["conflicts"])
		if len(cs) != 1 || cs[0].(map[string]any)["path"] != "src/a.go" {
			t.Errorf("%s's resume conflicts = %v, want src/a.go", agent, r["conflicts"])
		}
		code, md, errs := cli(t, env, "", "resume", "--peek", "--agent", agent)
		if code != 0 || !strings.Contains(md, "## Conflicts") || !strings.Contains(md, "src/a.go changed by builder and reviewer") {
			t.Errorf("%s's markdown resume (exit %d, %s) has no conflict line:\n%s", agent, code, errs, md)
		}
	}

	// Reviewer checkpoints past it: the conflict ends for both.
	if code, _, err := post(c, "/v1/continuity/checkpoint?agent=reviewer", map[string]any{"focus": "reviewed package a"}); err != nil || code != 200 {
		t.Fatalf("checkpoint: %d %v", code, err)
	}
	for _, agent := range []string{"builder", "reviewer"} {
		waitUntil(t, func() string { return agent + "'s conflicts to end after the checkpoint" }, func() bool {
			return len(asList(get(t, c, "/v1/continuity?peek=1&local=1&agent="+agent)["conflicts"])) == 0
		})
	}
}
