//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// helperBinary is a copy of this test binary in top, which the test's
// other users may run (go test's own directory is root's alone): as a
// flood (floodEnv) or an HTTP client (askEnv).
func helperBinary(t *testing.T, top string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(top, "helper.test")
	if err := os.WriteFile(path, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// askAs sends req over socket from a process of cred (helper, askEnv)
// and returns the answer with its body read.
func askAs(t *testing.T, helper string, cred *syscall.Credential, socket string, req *http.Request) (*http.Response, string) {
	t.Helper()
	var in, out, errb bytes.Buffer
	if err := req.Write(&in); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper)
	cmd.Env = append(os.Environ(), askEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s as uid %d: %v %s", req.Method, req.URL, cred.Uid, err, errb.String())
	}
	resp, err := http.ReadResponse(bufio.NewReader(&out), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// mcpRequest is a POST /mcp of one JSON-RPC message in session (none: "").
func mcpRequest(session, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "http://continuityd/mcp?agent=ours", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	return req
}

// accessWorkspace is a daemon of the daemon's user serving "ours" (which
// admits the member) and "theirs" (which admits nobody more than root and
// the daemon's user) on a socket its group shares; an outsider in the
// group reaches the socket but no agent.
func accessWorkspace(t *testing.T, prefix string) (top, state, socket, cfgPath string) {
	top = usersTop(t, prefix, "daemon", "daemon/ours", "daemon/theirs")
	home := filepath.Join(top, "daemon")
	state, socket, cfgPath = writeDaemonConfig(t, top, home, true, "", fmt.Sprintf(
		"[[agent]]\nname = \"ours\"\nworkdir = %q\nusers = [\"%d\"]\n\n[[agent]]\nname = \"theirs\"\nworkdir = %q\n",
		filepath.Join(home, "ours"), memberID, filepath.Join(home, "theirs")))
	return top, state, socket, cfgPath
}

// asGroupOutsider reaches the shared socket (the daemon's group) but is
// admitted to no agent.
var asGroupOutsider = &syscall.Credential{Uid: outsiderID, Gid: outsiderID, Groups: []uint32{daemonID}}

// TestPerAgentAccessAtEveryDoor: on a shared socket, with real users:
// an MCP session the member opened, its id reused by an outsider for a
// checkpoint, a resume, its stream or a DELETE, gets what a made-up id
// gets and writes nothing, and the member's session goes on; refusals
// that name agents (AGENT_REQUIRED, UNKNOWN_AGENT) name to the member only
// "ours"; /metrics shows the member only ours's series.
func TestPerAgentAccessAtEveryDoor(t *testing.T) {
	top, _, socket, cfgPath := accessWorkspace(t, "cddoors")
	helper := helperBinary(t, top)
	p := startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	c := p.client()
	defer c.CloseIdleConnections()

	// The member opens a session on ours.
	resp, body := askAs(t, helper, asMember, socket, mcpRequest("",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("the member's initialize: %d %s", resp.StatusCode, body)
	}
	askAs(t, helper, asMember, socket, mcpRequest(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	checkpoint := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"checkpoint","arguments":{"focus":"written through a stolen session"}}}`
	resume := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"resume","arguments":{}}}`
	for _, r := range []struct{ method, body string }{{"POST", checkpoint}, {"POST", resume}, {"GET", ""}, {"DELETE", ""}} {
		ask := func(session string) (int, string) {
			req := mcpRequest(session, r.body)
			req.Method = r.method
			if r.method != "POST" {
				req.Body, req.ContentLength = nil, 0
			}
			resp, body := askAs(t, helper, asGroupOutsider, socket, req)
			return resp.StatusCode, body
		}
		status, got := ask(id)
		wantStatus, want := ask("0123456789ABCDEFGHIJKLMNOP")
		if status != wantStatus || got != want || status != 404 {
			t.Errorf("outsider's %s with the member's session id: %d %s\nwant what a made-up id gets: %d %s", r.method, status, got, wantStatus, want)
		}
	}
	if focus, _ := get(t, c, "/v1/continuity?peek=1&agent=ours")["focus"].(string); focus != "" {
		t.Errorf("the outsider's checkpoint through the member's session was stored: focus %v", focus)
	}
	if resp, body := askAs(t, helper, asMember, socket, mcpRequest(id, strings.Replace(checkpoint, "written through a stolen session", "the member's own", 1))); resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
		t.Errorf("the member's session after the outsider's tries: %d %s", resp.StatusCode, body)
	}

	// Refusals name only the agents the caller may use.
	env := []string{"CONTINUITYD_SOCKET=" + socket}
	for _, args := range [][]string{{"resume"}, {"resume", "--agent", "nobody"}} {
		code, out, errOut := runAs(t, asMember, env, "", args...)
		if code != 1 || !strings.Contains(errOut, `"ours"`) || strings.Contains(out+errOut, "theirs") {
			t.Errorf("member's %s: exit %d, want 1 naming ours and not theirs\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, out, errOut := runAs(t, asGroupOutsider, env, "", "resume", "--agent", "nobody"); code != 1 || strings.Contains(out+errOut, "ours") || strings.Contains(out+errOut, "theirs") {
		t.Errorf("outsider's resume --agent nobody: exit %d, want 1 naming no agent\n%s%s", code, out, errOut)
	}

	// /metrics: the member sees ours's series, not theirs's; root both.
	req, _ := http.NewRequest(http.MethodGet, "http://continuityd/metrics", nil)
	if resp, body := askAs(t, helper, asMember, socket, req); resp.StatusCode != 200 || !strings.Contains(body, `agent="ours"`) || strings.Contains(body, `agent="theirs"`) {
		t.Errorf("member's /metrics: %d, ours %v, theirs %v", resp.StatusCode, strings.Contains(body, `agent="ours"`), strings.Contains(body, `agent="theirs"`))
	}
	if resp, body := askAs(t, helper, asGroupOutsider, socket, req); resp.StatusCode != 200 || strings.Contains(body, `agent="`) {
		t.Errorf("outsider's /metrics: %d, shows an agent's series: %v", resp.StatusCode, strings.Contains(body, `agent="`))
	}
	if _, raw := rawGet(t, c, "/metrics"); !strings.Contains(raw, `agent="ours"`) || !strings.Contains(raw, `agent="theirs"`) {
		t.Errorf("root's /metrics lacks an agent's series")
	}
	p.terminate(t)
}

// rawGet is a GET's status and body as text.
func rawGet(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get("http://d" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSpoolTakesOnlyAdmittedOwners: while the daemon is down, the member
// spools a PreCompact for "ours" (which admits it) and one for "theirs"
// (which does not), and the outsider in the daemon's group one for "ours":
// at the next start only the member's event for ours is stored; the two
// others are set aside in spool/failed with a WARN naming the file, the
// uid and the agent, and theirs counts no compaction.
func TestSpoolTakesOnlyAdmittedOwners(t *testing.T) {
	_, state, socket, cfgPath := accessWorkspace(t, "cdspool")
	start := func() *proc {
		return startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	}
	p := start() // makes the state directory and the shared spool
	p.terminate(t)
	env := []string{"CONTINUITYD_SOCKET=" + socket, "CONTINUITYD_STATE_DIR=" + state}
	preCompact := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"/","hook_event_name":"PreCompact","trigger":"auto"}`
	for _, h := range []struct {
		cred  *syscall.Credential
		agent string
	}{{asMember, "ours"}, {asMember, "theirs"}, {asGroupOutsider, "ours"}} {
		if code, out, errOut := runAs(t, h.cred, env, preCompact, "hook", "--agent", h.agent); code != 0 || out != "" {
			t.Fatalf("uid %d's hook for %s, daemon down: %d %q %q", h.cred.Uid, h.agent, code, out, errOut)
		}
	}
	spooled, _ := filepath.Glob(filepath.Join(state, "spool", "*.json"))
	if len(spooled) != 3 {
		t.Fatalf("spooled %v, want 3 events", spooled)
	}

	p = start()
	c := p.client()
	defer c.CloseIdleConnections()
	compactions := func(agent string) float64 {
		n, _ := get(t, c, "/v1/continuity?peek=1&agent="+agent)["context"].(map[string]any)["compactions"].(float64)
		return n
	}
	failed := func() []string {
		names, _ := filepath.Glob(filepath.Join(state, "spool", "failed", "*.json"))
		return names
	}
	waitUntil(t, func() string {
		return fmt.Sprintf("ours %v compactions (want 1), set aside %v (want 2):\n%s", compactions("ours"), failed(), p.stderr.String())
	}, func() bool { return compactions("ours") == 1 && len(failed()) == 2 })
	if n := compactions("theirs"); n != 0 {
		t.Errorf("theirs counts %v compactions from a member it does not admit", n)
	}
	logs := p.stderr.String()
	for _, want := range []string{
		fmt.Sprintf(`uid=%d agent=theirs`, memberID),
		fmt.Sprintf(`uid=%d agent=ours`, outsiderID),
	} {
		if !strings.Contains(logs, "spooled hook event refused") || !strings.Contains(logs, want) {
			t.Errorf("no WARN naming the file and %q:\n%s", want, logs)
		}
	}
	for _, f := range failed() {
		if !strings.Contains(logs, filepath.Base(f)) {
			t.Errorf("the WARN does not name %s", filepath.Base(f))
		}
	}
	p.terminate(t)
}

// TestHookCannotTakeAnotherAgentsTranscript: agent a1's Claude Code
// session lies in the daemon user's Claude home (0700: the member cannot
// read it), and a1 follows it. The member's hook for its own agent a2
// names that session as its transcript_path: refused (the member may not
// read it), logged naming the file and the member's uid, and a1 keeps
// following it while a2 does not. Root, who may read anything, naming it
// for a2 is refused too: it is no transcript of a2's workdir.
func TestHookCannotTakeAnotherAgentsTranscript(t *testing.T) {
	top := usersTop(t, "cdtranscript", "daemon", "daemon/a1", "daemon/a2", "daemon/claude", "daemon/codex")
	home := filepath.Join(top, "daemon")
	state, socket := filepath.Join(home, "state"), filepath.Join(home, "run", "d.sock")
	claudeHome := filepath.Join(home, "claude")
	a1Work, a2Work := filepath.Join(home, "a1"), filepath.Join(home, "a2")
	session := filepath.Join(transcript.ClaudeProjectDir(claudeHome, a1Work), "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, filepath.Dir(session), filepath.Base(session), strings.Join(agentFixture(t, "claude-code/transcript-short-session-v2.1.38.jsonl"), "\n")+"\n")
	for _, p := range []string{filepath.Dir(filepath.Dir(session)), filepath.Dir(session), session} {
		if err := os.Chown(p, daemonID, daemonID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(claudeHome, 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(top, "continuityd.toml")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nsocket_mode = \"0660\"\nshutdown_timeout = \"5s\"\n\n"+
		"[transcripts]\nclaude_home = %q\ncodex_home = %q\n\n"+
		"[[agent]]\nname = \"a1\"\nworkdir = %q\n\n[[agent]]\nname = \"a2\"\nworkdir = %q\nusers = [\"%d\"]\n",
		state, socket, claudeHome, filepath.Join(home, "codex"), a1Work, a2Work, memberID)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	c := p.client()
	defer c.CloseIdleConnections()
	waitUntil(t, func() string {
		return "a1 does not follow its session: " + transcriptFollowed(t, c, "a1") + "\n" + p.stderr.String()
	},
		func() bool { return transcriptFollowed(t, c, "a1") == "ok: following "+session })

	payload := func(cwd string) string {
		return hookPayload(t, "input-userpromptsubmit.json", func(m map[string]any) { m["cwd"], m["transcript_path"] = cwd, session })
	}
	env := []string{"CONTINUITYD_SOCKET=" + socket}
	if code, out, errOut := runAs(t, asMember, env, payload(a2Work), "hook", "--agent", "a2"); code != 0 || out != "" {
		t.Fatalf("member's hook for a2: exit %d %q %q", code, out, errOut)
	}
	refused := func(why string) bool {
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "a transcript named by a hook was refused") && strings.Contains(l, session) && strings.Contains(l, why) {
				return true
			}
		}
		return false
	}
	waitUntil(t, func() string {
		return "the member's hook naming a1's transcript is not refused in the log:\n" + p.stderr.String()
	},
		func() bool { return refused(fmt.Sprintf("uid=%d", memberID)) })
	if code, out, errOut := cli(t, env, payload(a2Work), "hook", "--agent", "a2"); code != 0 || out != "" {
		t.Fatalf("root's hook for a2: exit %d %q %q", code, out, errOut)
	}
	waitUntil(t, func() string {
		return "root's hook naming a1's transcript for a2 is not refused in the log:\n" + p.stderr.String()
	},
		func() bool { return refused("no transcript of a session launched in the agent's workdir") })
	// Both prompts were stored (the signals were; their transcript_path
	// was left out), so a2's capture has seen them: a2 follows nothing of
	// a1's, and a1 still follows its session.
	if got := transcriptFollowed(t, c, "a2"); strings.Contains(got, session) {
		t.Errorf("a2 follows a1's transcript: %s", got)
	}
	if got := transcriptFollowed(t, c, "a1"); got != "ok: following "+session {
		t.Errorf("a1 lost its transcript: status says %q", got)
	}
	p.terminate(t)
}
