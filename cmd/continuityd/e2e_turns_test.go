package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/testkit/mcptest"
)

// turnsWorkspace is one agent, builder, on a real git repository, the
// watcher quick to report and the policy's quiet period far away: the
// only snapshots after the start one are those the test causes.
// turnHook runs the hook command for agent builder on a real payload
// (testdata file), its cwd the workdir, no transcript, set changing it
// further; the hook must answer nothing and succeed.
func turnHook(t *testing.T, env []string, work string) func(file string, set func(m map[string]any)) {
	return func(file string, set func(m map[string]any)) {
		t.Helper()
		payload := hookPayload(t, file, func(m map[string]any) {
			m["cwd"] = work
			delete(m, "transcript_path")
			if set != nil {
				set(m)
			}
		})
		if code, out, errs := cli(t, env, payload, "hook", "--agent", "builder"); code != 0 || out != "" {
			t.Fatalf("hook %s: exit %d, out %q, err %s", file, code, out, errs)
		}
	}
}

func turnsWorkspace(t *testing.T) (*workspace, string) {
	t.Helper()
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[watch]\nquiet = \"100ms\"\n\n"+
		"[policy]\nquiet = \"1h\"\nmax_delay = \"2h\"\n\n"+
		"[transcripts]\nclaude_home = %q\ncodex_home = %q\n\n"+
		"[[agent]]\nname = \"builder\"\nworkdir = %q\n",
		w.state, w.socket, filepath.Join(w.dir, "claude"), filepath.Join(w.dir, "codex"), work)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	userGit(t, work, "init", "-q", "-b", "main")
	writeFile(t, work, "main.go", "package main\n\nfunc main() {}\n")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-qm", "start")
	return w, work
}

// turnSnapshot is a snapshot as GET /v1/snapshots lists it.
type turnSnapshot struct {
	ID      string `json:"id"`
	Trigger string `json:"trigger"`
	Parent  string `json:"parent"`
	Message string `json:"message"`
}

func listSnapshots(t *testing.T, c *http.Client) []turnSnapshot {
	t.Helper()
	resp, err := c.Get("http://d/v1/snapshots")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Snapshots []turnSnapshot `json:"snapshots"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Snapshots
}

// waitSnapshot waits for the newest snapshot to have trigger, and returns
// it.
func waitSnapshot(t *testing.T, c *http.Client, trigger string) turnSnapshot {
	t.Helper()
	var l []turnSnapshot
	waitUntil(t, func() string {
		return fmt.Sprintf("the newest snapshot to be a %s one; the snapshots: %+v", trigger, l)
	},
		func() bool { l = listSnapshots(t, c); return len(l) > 0 && l[0].Trigger == trigger })
	return l[0]
}

// TestTurnIsOneDiff: an agent's turn, through real Claude Code hook
// payloads (UserPromptSubmit, a Write's PostToolUse, Stop) and the real
// daemon, is bounded by two snapshots, turn_start and turn_end, with no
// other between them: their one diff holds the turn's edits and nothing
// from before it. Each file of turn_end says whose change it was: the
// agent's Write is "agent", a person's edit made during the turn while no
// tool ran is "outside" (GET /v1/snapshots/{id} and snapshot show).
func TestTurnIsOneDiff(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := turnsWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	hook := turnHook(t, env, work)
	start := waitSnapshot(t, c, "start")

	// Before the turn a person edits a file; the daemon sees it.
	writeFile(t, work, "before.md", "written before the prompt\n")
	waitUntil(t, func() string { return "the daemon to see before.md" },
		func() bool { return slices.Contains(byOthers(t, c, "builder"), "before.md outside") })

	// The prompt: the turn starts from the tree as it is.
	hook("input-userpromptsubmit.json", nil)
	first := waitSnapshot(t, c, "turn_start")
	if first.Parent != start.ID {
		t.Fatalf("turn_start's parent %s, want the start snapshot %s", first.Parent, start.ID)
	}

	// The turn: the agent's Write (the file, then its PostToolUse), and a
	// person's edit while no tool runs.
	writeFile(t, work, "main.go", "package main\n\nfunc main() { println(\"tax\") }\n")
	hook("input-posttooluse-write.json", func(m map[string]any) {
		m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, "main.go")
	})
	writeFile(t, work, "notes.md", "by hand, during the turn\n")
	waitUntil(t, func() string { return "the daemon to see notes.md" },
		func() bool { return slices.Contains(byOthers(t, c, "builder"), "notes.md outside") })

	hook("input-stop.json", nil)
	last := waitSnapshot(t, c, "turn_end")
	if last.Parent != first.ID {
		t.Fatalf("turn_end's parent %s, want turn_start %s: another snapshot fell inside the turn; snapshots %+v", last.Parent, first.ID, listSnapshots(t, c))
	}

	// One diff: exactly the turn's two files, each with whose it is.
	d := get(t, c, "/v1/snapshots/"+last.ID)
	got := map[string]string{}
	for _, f := range asList(d["files"]) {
		m := f.(map[string]any)
		by, _ := m["by"].(string)
		got[fmt.Sprint(m["path"])] = fmt.Sprintf("%v %s", m["status"], by)
	}
	want := map[string]string{"main.go": "modified agent", "notes.md": "added outside"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the turn's files: %v, want %v", got, want)
	}
	code, out, errOut := cli(t, env, "", "snapshot", "diff", "--stat", first.ID, last.ID)
	if code != 0 || !strings.Contains(out, "main.go") || !strings.Contains(out, "notes.md") || strings.Contains(out, "before.md") {
		t.Errorf("snapshot diff --stat turn_start turn_end (exit %d): %s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, "", "snapshot", "show", last.ID)
	if code != 0 || !lineWith(out, "agent", "main.go") || !lineWith(out, "outside", "notes.md") {
		t.Errorf("snapshot show (exit %d) does not say whose each file is: %s%s", code, out, errOut)
	}

	// The log names the turn's snapshots by their triggers.
	code, out, errOut = cli(t, env, "", "log")
	if code != 0 || !lineWith(out, "turn_end", "+1", "~1", "-0", last.ID[:12]) || !lineWith(out, "turn_start", first.ID[:12]) {
		t.Errorf("continuityd log (exit %d) does not show the turn:\n%s%s", code, out, errOut)
	}

	// A Stop with nothing changed since takes no snapshot.
	hook("input-stop.json", nil)
	hook("input-userpromptsubmit.json", nil)
	if l := listSnapshots(t, c); l[0].ID != last.ID {
		t.Errorf("an unchanged tree was snapshotted again: %+v", l[0])
	}
}

// lineWith reports whether a line of out holds every one of words.
func lineWith(out string, words ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(f, w) }) {
			return true
		}
	}
	return false
}

// TestSnapshotTakeWithMessage: `snapshot take --message` and the
// snapshot_take MCP tool each take a snapshot that list and show name
// with its message; a message holding a credential is refused naming the
// field, through both, and nothing is taken; an unchanged tree takes none.
func TestSnapshotTakeWithMessage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := turnsWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	waitSnapshot(t, c, "start")

	writeFile(t, work, "a.go", "package main\n")
	code, out, errOut := cli(t, env, "", "snapshot", "take", "--message", "before the parser rewrite")
	if code != 0 || !strings.HasPrefix(out, "snapshot ") || !strings.Contains(out, "1 added") {
		t.Fatalf("snapshot take (exit %d): %s%s", code, out, errOut)
	}
	l := listSnapshots(t, c)
	if l[0].Trigger != "manual" || l[0].Message != "before the parser rewrite" {
		t.Fatalf("the newest snapshot: %+v", l[0])
	}
	if _, out, _ := cli(t, env, "", "snapshot", "list"); !lineWith(out, "manual", "before", "parser", "rewrite") {
		t.Errorf("snapshot list does not show the message:\n%s", out)
	}
	if _, out, _ := cli(t, env, "", "snapshot", "show", l[0].ID); !strings.Contains(out, "message: before the parser rewrite") {
		t.Errorf("snapshot show does not show the message:\n%s", out)
	}
	// Nothing changed: no second snapshot of the same tree.
	code, out, _ = cli(t, env, "", "snapshot", "take", "--message", "again")
	if code != 0 || !strings.Contains(out, "no new snapshot") || listSnapshots(t, c)[0].ID != l[0].ID {
		t.Errorf("an unchanged tree (exit %d): %s", code, out)
	}

	secret := "ghp_" + "x7Kq2mP9vR4tY8wZ1nB5cD3fG6hJ0kL2sA4e"
	writeFile(t, work, "b.go", "package main\n")
	code, out, errOut = cli(t, env, "", "snapshot", "take", "--message", "token "+secret)
	if code == 0 || !strings.Contains(errOut, "SECRET_DETECTED") || !strings.Contains(errOut, "message") || strings.Contains(out+errOut, secret) {
		t.Errorf("a secret message through the CLI (exit %d): %s%s", code, out, errOut)
	}

	cs := mcpClientSession(t, p)
	res := mcptest.CallTool(t, cs, "snapshot_take", fmt.Sprintf(`{"message":"token %s"}`, secret))
	if txt := mcptest.Text(t, res); !res.IsError || !strings.Contains(txt, "SECRET_DETECTED") || !strings.Contains(txt, "message") || strings.Contains(txt, secret) {
		t.Errorf("a secret message through MCP: %v %s", res.IsError, txt)
	}
	if n := listSnapshots(t, c)[0]; n.ID != l[0].ID {
		t.Errorf("a refused message took a snapshot: %+v", n)
	}
	res = mcptest.CallTool(t, cs, "snapshot_take", `{"message":"b.go in"}`)
	if res.IsError {
		t.Fatalf("snapshot_take: %s", mcptest.Text(t, res))
	}
	if n := listSnapshots(t, c)[0]; n.Trigger != "manual" || n.Message != "b.go in" || n.Parent != l[0].ID {
		t.Errorf("the MCP tool's snapshot: %+v", n)
	}
}

// TestResumeMarksDoneWorkLost is the second scenario: the agent
// edits main.go (its Write and PostToolUse), reports the result done and
// stops; then `git checkout -- main.go` throws the edit away. Resume
// still lists the result, but marked with the loss that took its work
// (JSON working_state.lost, the markdown says so plainly), never as if
// the work existed.
func TestResumeMarksDoneWorkLost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := turnsWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	hook := turnHook(t, env, work)
	waitSnapshot(t, c, "start")

	// The prompt's snapshot is taken as the daemon handles its hook; the
	// test lets it be taken (a file of the person's makes it new) before
	// the agent edits.
	writeFile(t, work, "TODO.md", "wire the tax in\n")
	waitUntil(t, func() string { return "the daemon to see TODO.md" },
		func() bool { return slices.Contains(byOthers(t, c, "builder"), "TODO.md outside") })
	hook("input-userpromptsubmit.json", nil)
	waitSnapshot(t, c, "turn_start")
	writeFile(t, work, "main.go", "package main\n\nfunc tax() int { return 7 }\n\nfunc main() { println(tax()) }\n")
	hook("input-posttooluse-write.json", func(m map[string]any) {
		m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, "main.go")
	})
	if status, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{
		"working_state": map[string]any{"last_result": "Tax wired into main"}}); err != nil || status != 200 {
		t.Fatalf("checkpoint: %d %v %v", status, m, err)
	}
	hook("input-stop.json", nil)
	end := waitSnapshot(t, c, "turn_end")
	var files []any
	waitUntil(t, func() string {
		return fmt.Sprintf("main.go to be credited to the agent in %s; its files: %v", end.ID, files)
	}, func() bool {
		files = asList(get(t, c, "/v1/snapshots/"+end.ID)["files"])
		for _, f := range files {
			if m := f.(map[string]any); m["path"] == "main.go" && m["by"] == "agent" {
				return true
			}
		}
		return false
	})

	// Thrown away; the next snapshot finds the loss.
	userGit(t, work, "checkout", "--", "main.go")
	if code, out, errOut := cli(t, env, "", "snapshot", "take"); code != 0 {
		t.Fatalf("snapshot take (exit %d): %s%s", code, out, errOut)
	}
	var r map[string]any
	waitUntil(t, func() string { return fmt.Sprintf("resume to list the loss; it is %v", r["work_lost"]) }, func() bool {
		r = get(t, c, "/v1/continuity?peek=1&local=1")
		return len(asList(r["work_lost"])) > 0
	})
	lost := asList(r["work_lost"])[0].(map[string]any)
	ws, _ := r["working_state"].(map[string]any)
	if ws["last_result"] != "Tax wired into main" || ws["lost"] != lost["id"] {
		t.Errorf("working_state %v, want its lost = the loss %v", ws, lost["id"])
	}
	code, out, errOut := cli(t, env, "", "resume", "--peek")
	if code != 0 || !strings.Contains(out, "**Lost since**") || !strings.Contains(out, fmt.Sprint(lost["id"])) {
		t.Errorf("the markdown resume (exit %d) does not say the done work was lost:\n%s%s", code, out, errOut)
	}
}
