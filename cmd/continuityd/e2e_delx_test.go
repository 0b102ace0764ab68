package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

const e2eRegKey = "delx-reg-key-e2e-7f3a9c"

// TestDelxRegisteredIdentities: agents of one running daemon, registered
// one by one with `continuityd delx register` against a Delx stand-in that
// enforces the registration, the identity headers, sessions owned by the
// agent, the capsule schema and 60 requests per 60 s, ship under their own
// identities without a restart; an agent registered elsewhere is
// configured in the file; a Delx tool error is shown in status; no token
// reaches a log, the archive, status or resume.
func TestDelxRegisteredIdentities(t *testing.T) {
	const (
		elsewhereToken = "dxt_elsewhere_token_5b1d08e2"
		strayToken     = "dxt_stray_token_a9c43e71"
	)
	fake := delxtest.New(delxtest.Options{
		RegistrationKey: e2eRegKey,
		RateLimitStyle:  delxtest.StyleBoth,
		// Registered elsewhere: a3 by its own session, a4 by the session
		// of another agent (which Delx refuses).
		AgentTokens: map[string]string{"a3-elsewhere": elsewhereToken, "a4-elsewhere": strayToken},
		Sessions:    map[string]string{"sess_a3": "a3-elsewhere", "sess_other": "someone-else"},
	})
	t.Cleanup(fake.Close)

	w := newWorkspace(t)
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
socket = %q
shutdown_timeout = "5s"

[outbox]
unauthorized_retry = "10m"
min_backoff = "50ms"
max_backoff = "1s"

[policy]
enabled = false

[watch]
enabled = false

[transcripts]
enabled = false

[upstream.delx]
kind = "delx"
url = %q
rate = 20.0
burst = 10
timeout = "5s"

[[agent]]
name = "a1"
upstreams = ["local", "delx"]

[[agent]]
name = "a2"
upstreams = ["local", "delx"]

[[agent]]
name = "a3"
upstreams = ["local", "delx"]
[agent.identity.delx]
agent_id = "a3-elsewhere"
session_id = "sess_a3"
token_env = "CD_E2E_A3_TOKEN"

[[agent]]
name = "a4"
upstreams = ["local", "delx"]
[agent.identity.delx]
agent_id = "a4-elsewhere"
session_id = "sess_other"
token_file = %q
`, w.state, w.socket, fake.URL(), filepath.Join(w.dir, "a4.token"))
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "a4.token"), []byte(strayToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, []string{"CD_E2E_A3_TOKEN=" + elsewhereToken}, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	pid := int(get(t, c, "/v1/status")["pid"].(float64))

	put := func(agent, goal string) {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"version": "1", "goal": goal, "refuted": "batching: the old client is not idempotent"})
		req, _ := http.NewRequest(http.MethodPut, "http://d/v1/capsule?agent="+agent, bytes.NewReader(raw))
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("PUT capsule for %s: %v %v", agent, resp, err)
		}
		resp.Body.Close()
	}
	upstreamState := func(agent string) map[string]any {
		t.Helper()
		for _, a := range get(t, c, "/v1/status")["agents"].([]any) {
			a := a.(map[string]any)
			if a["name"] != agent {
				continue
			}
			for _, u := range a["upstreams"].([]any) {
				if u := u.(map[string]any); u["name"] == "delx" {
					return u
				}
			}
		}
		t.Fatalf("no delx upstream for %s in status", agent)
		return nil
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never happened\ncalls: %+v\ndaemon: %s", what, fake.Calls(), p.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Before any registration: a1's capsule waits, unauthorized, saying
	// how to get an identity; nothing reaches Delx for it.
	put("a1", "hand the parser work over")
	waitUntil("a1 unauthorized", func() bool { return upstreamState("a1")["state"] == "unauthorized" })
	if le, _ := upstreamState("a1")["last_error"].(string); !strings.Contains(le, "continuityd delx register --agent a1 --upstream delx") {
		t.Fatalf("last_error does not say how to register: %q", le)
	}
	for _, call := range fake.Calls() {
		if call.AgentID == "a1" || call.AgentID == "" {
			t.Fatalf("a call went out without an identity: %+v", call)
		}
	}

	// Register a1 (its own name) and a2 (an agent_id of its choosing).
	key := []string{"DELX_REGISTRATION_KEY=" + e2eRegKey}
	var outputs strings.Builder
	for _, reg := range [][]string{
		{"delx", "register", "--agent", "a1", "--config", w.config},
		{"delx", "register", "--agent", "a2", "--upstream", "delx", "--agent-id", "delx-a2-custom", "--config", w.config},
	} {
		code, out, errOut := cli(t, key, "", reg...)
		outputs.WriteString(out + errOut)
		if code != 0 || !strings.Contains(out, "session_id: sess_") || !strings.Contains(out, "delx-identity-delx.json") {
			t.Fatalf("%v: exit %d\n%s%s", reg, code, out, errOut)
		}
	}
	regs := fake.Registrations()
	if len(regs) != 2 || regs[0].AgentID != "a1" || regs[1].AgentID != "delx-a2-custom" || regs[0].Source != "continuityd" {
		t.Fatalf("registrations: %+v", regs)
	}
	identity := map[string]delxtest.Registration{"a1": regs[0], "a2": regs[1]}
	for agent := range identity {
		fi, err := os.Stat(filepath.Join(w.state, "agents", agent, "delx-identity-delx.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s identity file: %v %v", agent, fi, err)
		}
	}
	// Registering again is explicit; a missing key is bad usage.
	if code, _, errOut := cli(t, key, "", "delx", "register", "--agent", "a1", "--config", w.config); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("second registration without --force: exit %d %s", code, errOut)
	}
	if code, _, errOut := cli(t, []string{"DELX_REGISTRATION_KEY="}, "", "delx", "register", "--agent", "a1", "--force", "--config", w.config); code != 2 || !strings.Contains(errOut, "DELX_REGISTRATION_KEY") {
		t.Fatalf("no key: exit %d %s", code, errOut)
	}
	if code, _, errOut := cli(t, key, "", "delx", "register", "--agent", "a3", "--config", w.config); code != 2 || !strings.Contains(errOut, "[agent.identity.delx]") {
		t.Fatalf("an agent with its identity in the config: exit %d %s", code, errOut)
	}
	if n := len(fake.Registrations()); n != 2 {
		t.Fatalf("%d registrations, want 2", n)
	}

	// The same daemon, no restart: a1's waiting capsule goes out now.
	okCalls := func(agentID, tool string) []delxtest.Call {
		var out []delxtest.Call
		for _, call := range fake.Calls() {
			if call.Result == "ok" && call.AgentID == agentID && call.Tool == tool {
				out = append(out, call)
			}
		}
		return out
	}
	waitUntil("a1's first capsule", func() bool { return len(okCalls("a1", "leave_hive_note")) == 1 })

	put("a2", "review the parser")
	put("a3", "ship the migration")
	put("a4", "this one Delx refuses")
	for _, agent := range []string{"a1", "a2"} {
		if status, m, err := post(c, "/v1/capsule/seal?agent="+agent, map[string]any{}); err != nil || status != 200 {
			t.Fatalf("seal %s: %d %v %v", agent, status, m, err)
		}
	}
	if status, m, err := post(c, "/v1/signals?agent=a1", map[string]any{"kind": "session", "event": "end", "reason": "logout"}); err != nil || status != 200 {
		t.Fatalf("session end: %d %v %v", status, m, err)
	}
	waitUntil("every capsule, seal and session end", func() bool {
		return len(okCalls("a1", "leave_hive_note")) == 2 && len(okCalls("delx-a2-custom", "leave_hive_note")) == 2 &&
			len(okCalls("a1", "close_session")) == 1 && len(okCalls("a3-elsewhere", "leave_hive_note")) == 1 &&
			upstreamState("a4")["state"] == "rejected"
	})
	// Every call under the agent's own identity: its agent_id and token in
	// the headers, its issued session_id in the arguments.
	for agent, reg := range identity {
		for _, tool := range []string{"leave_hive_note", "close_session"} {
			for _, call := range okCalls(reg.AgentID, tool) {
				if call.Header.Get("x-delx-agent-token") != reg.Token || call.SessionID != reg.SessionID {
					t.Errorf("%s: %s with session %q and another token", agent, tool, call.SessionID)
				}
			}
		}
	}
	if calls := okCalls("a3-elsewhere", "leave_hive_note"); calls[0].SessionID != "sess_a3" || calls[0].Header.Get("x-delx-agent-token") != elsewhereToken {
		t.Errorf("a3 (configured): %+v", calls[0])
	}
	for _, call := range fake.Calls() {
		if call.Result != "ok" && call.AgentID != "a4-elsewhere" {
			t.Errorf("a refused call: %s %s %s %s", call.AgentID, call.Tool, call.Result, call.Message)
		}
	}
	// resume_session asks for the agent's own agent_id.
	res := get(t, c, "/v1/continuity?agent=a2&peek=1")
	if _, ok := res["remote"].(map[string]any)["delx"]; !ok || len(okCalls("delx-a2-custom", "resume_session")) == 0 {
		t.Errorf("a2's resume_session: %v", res["remote"])
	}

	// The Delx tool error of the dead-lettered write is where the
	// operator looks: status and resume name its code and message.
	for _, u := range []map[string]any{upstreamState("a4"), delxOf(t, get(t, c, "/v1/continuity?agent=a4&peek=1"))} {
		le, _ := u["last_error"].(string)
		if u["state"] != "rejected" || u["dead_letter"].(float64) != 1 || !strings.Contains(le, "SESSION_NOT_OWNED") || !strings.Contains(le, "session_id belongs to another agent") {
			t.Errorf("a4: %v", u)
		}
	}

	if now := int(get(t, c, "/v1/status")["pid"].(float64)); now != pid {
		t.Fatalf("the daemon restarted: pid %d, then %d", pid, now)
	}
	if n := fake.MaxInWindow(time.Minute); n > 60 {
		t.Errorf("%d requests to Delx within a minute", n)
	}

	// No token anywhere but the identity files (and a4's token file).
	var seen strings.Builder
	seen.WriteString(p.stderr.String())
	seen.WriteString(outputs.String())
	for _, path := range []string{"/v1/status", "/v1/continuity?agent=a1&peek=1", "/v1/continuity?agent=a3&peek=1", "/v1/deadletter?agent=a4"} {
		raw, _ := json.Marshal(get(t, c, path))
		seen.Write(raw)
	}
	archives := 0
	filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), "delx-identity-") {
			if strings.Contains(path, string(filepath.Separator)+"archive"+string(filepath.Separator)) {
				archives++
			}
			b, _ := os.ReadFile(path)
			seen.Write(b)
		}
		return nil
	})
	if archives == 0 {
		t.Fatal("no archive was written")
	}
	for _, tok := range []string{identity["a1"].Token, identity["a2"].Token, elsewhereToken, strayToken, e2eRegKey} {
		if strings.Contains(seen.String(), tok) {
			t.Errorf("a token or the registration key (%.8s…) is in a log, the state directory, status or resume", tok)
		}
	}
	p.terminate(t)
}

// delxOf is the delx entry of a resume's upstreams.
func delxOf(t *testing.T, resume map[string]any) map[string]any {
	t.Helper()
	for _, u := range resume["upstreams"].([]any) {
		if u := u.(map[string]any); u["name"] == "delx" {
			return u
		}
	}
	t.Fatalf("no delx upstream in %v", resume["upstreams"])
	return nil
}
