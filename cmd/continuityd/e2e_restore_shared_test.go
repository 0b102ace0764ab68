package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// agentSnapshots lists agent's snapshots, newest first.
func agentSnapshots(t *testing.T, c *http.Client, agent string) []string {
	t.Helper()
	var ids []string
	for _, s := range asList(get(t, c, "/v1/snapshots?agent="+agent)["snapshots"]) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	return ids
}

// TestRestoreOwnPathsTwoAgentsAndAPerson: two agents of one daemon on one
// workdir (real git, the real watcher, real hook payloads through
// `continuityd hook`) and a person beside them. After the start snapshot,
// the person edits notes.md, builder writes src/a.go (PostToolUse Write),
// reviewer's shell writes gen/out.txt (between its PreToolUse and
// PostToolUse of Bash). `continuityd snapshot restore ID --agent builder`
// without --path puts back only builder's file, leaves reviewer's and the
// person's as they are and names each with whose change it is (the CLI's
// lines and the JSON answer's left_alone); reviewer's dry run of the same
// kind names the mirror image. --all then restores the whole tree.
func TestRestoreOwnPathsTwoAgentsAndAPerson(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := attributionWorkspace(t)
	before := map[string]string{"src/a.go": "package a\n", "gen/out.txt": "generated 1\n", "notes.md": "notes 1\n"}
	for rel, content := range before {
		writeFile(t, work, rel, content)
	}
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-qm", "the files")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	start := map[string]string{} // agent → its start snapshot
	for _, a := range []string{"builder", "reviewer"} {
		var ids []string
		waitUntil(t, func() string { return fmt.Sprintf("%s's start snapshot (%v); log:\n%s", a, ids, p.stderr) },
			func() bool { ids = agentSnapshots(t, c, a); return len(ids) >= 1 })
		start[a] = ids[len(ids)-1]
	}

	hook := func(agent, payload string) {
		t.Helper()
		if code, out, errs := cli(t, env, payload, "hook", "--agent", agent); code != 0 || out != "" {
			t.Fatalf("hook --agent %s: exit %d, out %q, err %s", agent, code, out, errs)
		}
	}
	waitByOthers := func(agent string, want ...string) {
		t.Helper()
		var got []string
		waitUntil(t, func() string { return fmt.Sprintf("%s's by_others to hold %q; it holds %q", agent, want, got) },
			func() bool { got = byOthers(t, c, agent); return hasAll(got, want...) })
	}

	// The person's edit, before any tool runs (a change just after a
	// shell's end is within the ledger's slack for that shell).
	writeFile(t, work, "notes.md", "notes 2, by hand\n")
	waitByOthers("builder", "notes.md outside")

	// Builder's Write tool: the file, then its PostToolUse.
	writeFile(t, work, "src/a.go", "package a // builder's\n")
	hook("builder", hookPayload(t, "input-posttooluse-write.json", func(m map[string]any) {
		m["cwd"] = work
		m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, "src/a.go")
	}))
	// Reviewer's Bash: what its command writes while it runs.
	shell := func(event string) {
		t.Helper()
		hook("reviewer", hookPayload(t, "input-pretooluse-common-fields.json", func(m map[string]any) {
			m["cwd"], m["hook_event_name"], m["tool_use_id"] = work, event, "toolu_e2e_restore"
		}))
	}
	shell("PreToolUse")
	writeFile(t, work, "gen/out.txt", "generated 2\n")
	waitByOthers("builder", "gen/out.txt agent:reviewer")
	shell("PostToolUse")
	waitByOthers("reviewer", "src/a.go agent:builder", "notes.md outside")

	// Reviewer's dry run: its own file, the others named.
	code, out, errs := cli(t, env, "", "snapshot", "restore", start["reviewer"], "--agent", "reviewer", "--dry-run")
	if code != 0 || !strings.Contains(out, "restore gen/out.txt\n") || strings.Contains(out, "restore src/a.go") ||
		!strings.Contains(out, "left alone src/a.go: changed by agent:builder\n") || !strings.Contains(out, "left alone notes.md: changed by outside\n") {
		t.Fatalf("reviewer's dry run (exit %d):\n%s%s", code, out, errs)
	}

	// Builder's restore without --path: the JSON answer of a dry run,
	// then the restore itself through the CLI.
	code, out, errs = cli(t, env, "", "snapshot", "restore", start["builder"], "--agent", "builder", "--dry-run", "--json")
	var ans struct {
		Scope     string `json:"scope"`
		Changes   []struct{ Path, Status string }
		LeftAlone []struct{ Path, By string } `json:"left_alone"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil {
		t.Fatalf("dry run --json (exit %d): %s%s", code, out, errs)
	}
	left := []string{}
	for _, l := range ans.LeftAlone {
		left = append(left, l.Path+" "+l.By)
	}
	slices.Sort(left)
	if ans.Scope != "mine" || len(ans.Changes) != 1 || ans.Changes[0].Path != "src/a.go" ||
		!slices.Equal(left, []string{"gen/out.txt agent:reviewer", "notes.md outside"}) {
		t.Fatalf("builder's dry run answer: %s", out)
	}
	code, out, errs = cli(t, env, "", "snapshot", "restore", start["builder"], "--agent", "builder")
	if code != 0 || !strings.Contains(out, "restore src/a.go\n") || strings.Contains(out, "restore gen/out.txt") || strings.Contains(out, "restore notes.md") ||
		!strings.Contains(out, "left alone gen/out.txt: changed by agent:reviewer\n") || !strings.Contains(out, "left alone notes.md: changed by outside\n") ||
		!strings.Contains(out, "only the files this agent changed") {
		t.Fatalf("builder's restore (exit %d):\n%s%s", code, out, errs)
	}
	for rel, want := range map[string]string{"src/a.go": before["src/a.go"], "gen/out.txt": "generated 2\n", "notes.md": "notes 2, by hand\n"} {
		if got := readFile(t, work, rel); got != want {
			t.Errorf("after builder's restore of its own files, %s is %q, want %q", rel, got, want)
		}
	}

	// --all: the whole tree, everyone's files.
	code, out, errs = cli(t, env, "", "snapshot", "restore", start["builder"], "--agent", "builder", "--all")
	if code != 0 || strings.Contains(out, "left alone") || !strings.Contains(out, "restore gen/out.txt\n") || !strings.Contains(out, "restore notes.md\n") {
		t.Fatalf("builder's restore --all (exit %d):\n%s%s", code, out, errs)
	}
	for rel, want := range before {
		if got := readFile(t, work, rel); got != want {
			t.Errorf("after restore --all, %s is %q, want %q", rel, got, want)
		}
	}
}
