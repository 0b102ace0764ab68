package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pelletier/go-toml/v2"

	"github.com/continuityd/continuityd/internal/testkit/mcptest"
)

// agentPayload reads a real hook payload (testdata/agents/NOTE.md says
// where each comes from) and places it in the workdir, as the agent would
// send it from there: cwd and the transcript's path, nothing else.
func agentPayload(t *testing.T, name, workdir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["cwd"] = workdir
	m["transcript_path"] = filepath.Join(workdir, ".transcript.jsonl")
	out, _ := json.Marshal(m)
	return out
}

// snapshotTree returns every file under dir and its bytes.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, p)
			files[rel] = string(b)
		}
		return nil
	})
	return files
}

// hookGroup is a Claude Code or Codex hook group as their files hold it.
type hookGroup struct {
	Matcher string `json:"matcher" toml:"matcher"`
	Hooks   []struct {
		Type    string `json:"type" toml:"type"`
		Command string `json:"command" toml:"command"`
	} `json:"hooks" toml:"hooks"`
}

// matching returns the commands of groups whose matcher matches value, as
// the agents match: a regular expression over the whole value, none or ""
// for every occurrence.
func matching(t *testing.T, groups []hookGroup, value string) []string {
	t.Helper()
	var cmds []string
	for _, g := range groups {
		if g.Matcher != "" && g.Matcher != "*" && !regexp.MustCompile("^(?:"+g.Matcher+")$").MatchString(value) {
			continue
		}
		for _, h := range g.Hooks {
			if h.Type == "command" {
				cmds = append(cmds, h.Command)
			}
		}
	}
	return cmds
}

// runAgentCommand runs a command from an agent's settings as the agent
// does: through the shell, in the project, the payload on stdin.
func runAgentCommand(t *testing.T, command, dir string, env []string, stdin []byte) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v %s", command, err, &stderr)
	}
	return string(out)
}

// agentEnv is the environment an agent gives its hooks: a HOME, a PATH
// that finds continuityd by name, and the daemon's socket.
func agentEnv(home, socket string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CLAUDE_CONFIG_DIR=") && !strings.HasPrefix(kv, "CODEX_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), "CONTINUITYD_SOCKET="+socket)
}

// signalAfter returns the kind of the last signal the daemon received
// after cursor, and the new cursor.
func signalAfter(t *testing.T, p *proc, cursor any) (kind, via string, next any) {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	ev := get(t, c, fmt.Sprintf("/v1/continuity/wait?max_seconds=5&after=%v", cursor))
	for _, e := range ev["events"].([]any) {
		if m := e.(map[string]any); m["kind"] == "signal" {
			data, _ := m["data"].(map[string]any)
			kind, _ = data["kind"].(string)
			via, _ = data["via"].(string)
		}
	}
	return kind, via, ev["cursor"]
}

// TestInstallClaudeCodeEndToEnd: `continuityd install claude-code` into a
// fresh HOME, then the commands Claude Code would run from the files it
// wrote (the hooks, matched as Claude Code matches them, the status line,
// the MCP server), fed real payloads, reach a real daemon and are stored;
// `continuityd uninstall claude-code` leaves the HOME as it was, byte for
// byte, with nothing of continuityd's in it. A HOME with the user's own
// settings (another tool's hook, their own status line) gets the same,
// their status line still printing, and the same bytes back.
func TestInstallClaudeCodeEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()

	own := `{
  "hooks": {
    "PostToolUse": [
      {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "echo formatted >> \"$HOOK_LOG\""}]}
    ]
  },
  "statusLine": {"type": "command", "command": "printf 'my own line'", "padding": 0}
}
`
	for _, tc := range []struct {
		name     string
		settings string // the user's ~/.claude/settings.json, "" for none
	}{{"fresh HOME", ""}, {"the user's own settings", own}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.settings != "" {
				os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
				if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(tc.settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshotTree(t, home)
			hookLog := filepath.Join(t.TempDir(), "gofmt.log")
			env := append([]string{"HOOK_LOG=" + hookLog}, agentEnv(home, w.socket)...)
			code, out, errOut := runBinary(t, binary, env[len(env)-3:], "", "install", "claude-code")
			if code != 0 || !strings.Contains(out, "continuityd installed for Claude Code (user scope)") || errOut != "" {
				t.Fatalf("install: %d %q %q", code, out, errOut)
			}

			var s struct {
				Hooks      map[string][]hookGroup   `json:"hooks"`
				StatusLine struct{ Command string } `json:"statusLine"`
			}
			raw, err := os.ReadFile(filepath.Join(home, ".claude", "settings.json"))
			if err != nil || json.Unmarshal(raw, &s) != nil {
				t.Fatalf("settings.json: %v\n%s", err, raw)
			}
			// Each event's real payload, through every command Claude Code
			// would run for it.
			cursor := get(t, c, "/v1/continuity/wait?max_seconds=1")["cursor"]
			for _, e := range []struct{ file, event, matchOn, signal string }{
				{"claude-code/input-sessionstart-startup.json", "SessionStart", "startup", "session"},
				{"claude-code/input-userpromptsubmit.json", "UserPromptSubmit", "", "activity"},
				{"claude-code/input-pretooluse-common-fields.json", "PreToolUse", "Bash", "activity"},
				{"claude-code/input-posttooluse-write.json", "PostToolUse", "Write", "activity"},
				{"claude-code/input-precompact-manual.json", "PreCompact", "manual", "compaction"},
				{"claude-code/input-postcompact-manual.json", "PostCompact", "manual", "compaction"},
				{"claude-code/input-stop.json", "Stop", "", "session"},
				{"claude-code/input-sessionend-other.json", "SessionEnd", "other", "session"},
			} {
				payload := agentPayload(t, e.file, work)
				var ours []string
				for _, cmd := range matching(t, s.Hooks[e.event], e.matchOn) {
					if strings.HasPrefix(cmd, "continuityd ") {
						ours = append(ours, cmd)
					}
					stdout := runAgentCommand(t, cmd, work, env, payload)
					if e.event == "SessionStart" && strings.HasPrefix(cmd, "continuityd ") && !strings.Contains(stdout, "# Where builder was") {
						t.Fatalf("SessionStart answered %q", stdout)
					}
				}
				if len(ours) != 1 {
					t.Fatalf("%s runs %q of continuityd's, want one", e.event, ours)
				}
				var kind, via string
				kind, via, cursor = signalAfter(t, p, cursor)
				if kind != e.signal || via != "hook" {
					t.Fatalf("%s reached the daemon as %q via %q, want a %s signal from the hook", e.event, kind, via, e.signal)
				}
			}
			if tc.settings != "" {
				if log, _ := os.ReadFile(hookLog); string(log) != "formatted\n" {
					t.Fatalf("the user's own PostToolUse hook ran: %q", log)
				}
			}
			// The status line: the user's own first, then continuityd's,
			// and the context used reaches the daemon.
			line := runAgentCommand(t, s.StatusLine.Command, work, env, agentPayload(t, "claude-code/statusline-captured-later-render-v2.1.226-windows.json", work))
			if !strings.Contains(line, "ctx 22%") || tc.settings != "" && !strings.HasPrefix(line, "my own line │ ") {
				t.Fatalf("status line %q", line)
			}
			if f := get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)["used_fraction"]; f != 0.22 {
				t.Fatalf("the status line's context reached the daemon as %v", f)
			}
			// The MCP server, as Claude Code starts it from ~/.claude.json.
			var mcpFile struct {
				MCPServers map[string]struct {
					Command string
					Args    []string
				} `json:"mcpServers"`
			}
			raw, _ = os.ReadFile(filepath.Join(home, ".claude.json"))
			json.Unmarshal(raw, &mcpFile)
			srv := mcpFile.MCPServers["continuityd"]
			focus := "focus set through the installed MCP server (" + tc.name + ")"
			callInstalledServer(t, exec.Command(lookPathIn(t, env, srv.Command), srv.Args...), env, work, focus)
			if got := get(t, c, "/v1/continuity?peek=1")["focus"]; got != focus {
				t.Fatalf("focus %v", got)
			}

			code, out, errOut = runBinary(t, binary, env[len(env)-3:], "", "uninstall", "claude-code")
			if code != 0 || errOut != "" {
				t.Fatalf("uninstall: %d %q %q", code, out, errOut)
			}
			after := snapshotTree(t, home)
			for name, b := range after {
				if strings.Contains(name, ".continuityd-backup-") {
					continue // the file as it was before each change, beside it
				}
				if before[name] != b {
					t.Errorf("after uninstall %s differs from before:\n%s\nwant\n%s", name, b, before[name])
				}
				if strings.Contains(b, "continuityd") {
					t.Errorf("after uninstall %s still holds continuityd: %s", name, b)
				}
			}
			for name := range before {
				if _, ok := after[name]; !ok {
					t.Errorf("after uninstall %s is gone", name)
				}
			}
		})
	}
}

// lookPathIn finds name on the PATH of env, as the agent that starts it
// would.
func lookPathIn(t *testing.T, env []string, name string) string {
	t.Helper()
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode()&0o111 != 0 {
					return filepath.Join(dir, name)
				}
			}
		}
	}
	t.Fatalf("%s is not on the agent's PATH", name)
	return ""
}

// callInstalledServer starts an installed MCP server command on pipes, as
// an MCP client does, and sets the focus through its checkpoint tool.
func callInstalledServer(t *testing.T, cmd *exec.Cmd, env []string, dir, focus string) {
	t.Helper()
	cmd.Env, cmd.Dir = env, dir
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	stderr := &syncBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("initialize: %v (stderr %s)", err, stderr)
	}
	if res := mcptest.CallTool(t, cs, "checkpoint", `{"focus":"`+focus+`"}`); res.IsError {
		t.Fatalf("checkpoint: %s", mcptest.Text(t, res))
	}
	cs.Close()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the MCP server did not exit when its client closed: %s", stderr)
	}
}

// TestInstallCodexEndToEnd: `continuityd install codex` into a Codex
// config that already holds a [features] table and another tool's hooks
// gives a config Codex can read (one [features], hooks on), whose
// PreCompact hook, fed a real Codex payload, reaches the daemon; uninstall
// gives back the original bytes.
func TestInstallCodexEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	os.MkdirAll(codexHome, 0o700)
	orig, err := os.ReadFile(filepath.Join("..", "..", "internal", "front", "agentconf", "testdata", "golden", "codex-config", "d-kuro.toml"))
	if err != nil {
		t.Fatal(err)
	}
	orig = append(orig, "\n[[hooks.PreCompact]]\n[[hooks.PreCompact.hooks]]\ntype = \"command\"\ncommand = \"echo compacting >> \\\"$HOME/other.log\\\"\"\n"...)
	config := filepath.Join(codexHome, "config.toml")
	os.WriteFile(config, orig, 0o600)
	env := agentEnv(home, w.socket)
	if code, out, errOut := runBinary(t, binary, env[len(env)-3:], "", "install", "codex"); code != 0 || !strings.Contains(out, "/hooks") {
		t.Fatalf("install: %d %q %q", code, out, errOut)
	}
	raw, _ := os.ReadFile(config)
	if n := bytes.Count(raw, []byte("[features]")); n != 1 {
		t.Fatalf("%d [features] tables:\n%s", n, raw)
	}
	var cfg struct {
		Features map[string]any         `toml:"features"`
		Hooks    map[string][]hookGroup `toml:"hooks"`
	}
	if err := toml.Unmarshal(raw, &cfg); err != nil || cfg.Features["hooks"] != true {
		t.Fatalf("%v %v\n%s", err, cfg.Features, raw)
	}
	cursor := get(t, p.client(), "/v1/continuity/wait?max_seconds=1")["cursor"]
	payload := agentPayload(t, "codex/hook-precompact-auto-captured-gpt-5.5-sirsi-pantheon-line1.json", work)
	cmds := matching(t, cfg.Hooks["PreCompact"], "auto")
	if len(cmds) != 2 {
		t.Fatalf("PreCompact runs %q", cmds)
	}
	for _, cmd := range cmds {
		runAgentCommand(t, cmd, work, env, payload)
	}
	if kind, via, _ := signalAfter(t, p, cursor); kind != "compaction" || via != "hook" {
		t.Fatalf("PreCompact reached the daemon as %q via %q", kind, via)
	}
	if log, _ := os.ReadFile(filepath.Join(home, "other.log")); string(log) != "compacting\n" {
		t.Fatalf("the other tool's hook: %q", log)
	}
	if code, _, errOut := runBinary(t, binary, env[len(env)-3:], "", "uninstall", "codex"); code != 0 {
		t.Fatalf("uninstall: %d %s", code, errOut)
	}
	if got, _ := os.ReadFile(config); !bytes.Equal(got, orig) {
		t.Fatalf("after uninstall:\n%s\nwant\n%s", got, orig)
	}
}
