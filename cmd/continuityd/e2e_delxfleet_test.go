package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

// TestDelxFleetMembers: against the Delx stand-in, which decides fleet
// membership from its own records of who joined with the invite token, an
// agent's capsule goes to its fleet and a fellow member reads it with
// `capsule show --fleet-member`; an agent configured with the fleet but
// never joined is refused by Delx (FLEET_READ_REFUSED naming
// NOT_FLEET_MEMBER), one with no fleet is NO_DELX_FLEET; a member's capsule
// that carries hidden characters or a credential is cleaned before it is
// shown, and one that fails the schema is not shown at all; the invite
// token reaches Delx and nothing else: no log, file, status or answer.
func TestDelxFleetMembers(t *testing.T) {
	const invite = "inv-fleet-alpha-5e8c1b2d9a"
	fake := delxtest.New(delxtest.Options{
		AgentTokens: map[string]string{"fa": "dxt-fa-1", "fb": "dxt-fb-1", "fc": "dxt-fc-1", "fd": "dxt-fd-1"},
		Sessions:    map[string]string{"s-fa": "fa", "s-fb": "fb", "s-fc": "fc", "s-fd": "fd"},
		Fleets:      map[string]string{"alpha": invite},
	})
	t.Cleanup(fake.Close)

	w := newWorkspace(t)
	inviteFile := filepath.Join(w.dir, "alpha.invite")
	if err := os.WriteFile(inviteFile, []byte(invite+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := func(name, fleet string) string {
		return fmt.Sprintf("\n[[agent]]\nname = %q\nupstreams = [\"local\", \"delx\"]\n[agent.identity.delx]\nagent_id = \"f%s\"\nsession_id = \"s-f%s\"\ntoken_env = \"CD_E2E_F%s\"\n%s",
			name, name, name, strings.ToUpper(name), fleet)
	}
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
socket = %q
shutdown_timeout = "5s"

[outbox]
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
`, w.state, w.socket, fake.URL()) +
		agent("a", "[agent.delx_fleet.delx]\nfleet_id = \"alpha\"\ntoken_env = \"CD_E2E_INVITE\"\n") +
		agent("b", fmt.Sprintf("[agent.delx_fleet.delx]\nfleet_id = \"alpha\"\ntoken_file = %q\n", inviteFile)) +
		agent("c", "[agent.delx_fleet.delx]\nfleet_id = \"alpha\"\n") +
		agent("d", "")
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, nil, "", "config", "check", w.config); code != 0 {
		t.Fatalf("config check: %d %s %s", code, out, errOut)
	}
	env := []string{"CD_E2E_FA=dxt-fa-1", "CD_E2E_FB=dxt-fb-1", "CD_E2E_FC=dxt-fc-1", "CD_E2E_FD=dxt-fd-1", "CD_E2E_INVITE=" + invite}
	p := startProc(t, w.socket, env, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()

	raw, _ := json.Marshal(map[string]any{"version": "1", "goal": "port the ledger to the new store", "refuted": "a dual write: the old store drops ordering"})
	req, _ := http.NewRequest(http.MethodPut, "http://d/v1/capsule?agent=a", bytes.NewReader(raw))
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT a's capsule: %v %v", resp, err)
	}
	resp.Body.Close()
	waitUntil(t, func() string {
		return fmt.Sprintf("a's capsule never reached the fleet; calls: %+v\n%s", fake.Calls(), p.stderr)
	}, func() bool {
		for _, call := range fake.Calls() {
			if call.Result == "ok" && call.AgentID == "fa" && call.Tool == "leave_hive_note" && call.FleetID == "alpha" && call.InviteToken == invite {
				return true
			}
		}
		return false
	})

	show := func(agent string, more ...string) (int, string, string) {
		t.Helper()
		return cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", append([]string{"capsule", "show", "--agent", agent}, more...)...)
	}
	var outputs strings.Builder
	// A member reads a member.
	code, out, errOut := show("b", "--fleet-member", "fa")
	outputs.WriteString(out + errOut)
	if code != 0 || !strings.Contains(out, "port the ledger to the new store") || !strings.Contains(errOut, "[from upstream delx, not from your user]") || !strings.Contains(errOut, "fleet alpha") {
		t.Fatalf("b reading fa: exit %d\n%s%s", code, out, errOut)
	}
	// Configured with the fleet, never joined: Delx refuses.
	code, out, errOut = show("c", "--fleet-member", "fa")
	outputs.WriteString(out + errOut)
	if code != 1 || !strings.Contains(errOut, "FLEET_READ_REFUSED") || !strings.Contains(errOut, "NOT_FLEET_MEMBER") || strings.Contains(out, "ledger") {
		t.Fatalf("c (not a member) reading fa: exit %d\n%s%s", code, out, errOut)
	}
	var refusedByFake bool
	for _, call := range fake.Calls() {
		refusedByFake = refusedByFake || call.AgentID == "fc" && call.Tool == "resume_session" && call.FleetID == "alpha" && call.Result == "tool_error"
	}
	if !refusedByFake {
		t.Fatalf("c's read never reached Delx: %+v", fake.Calls())
	}
	// No fleet at all: said locally, nothing sent.
	code, out, errOut = show("d", "--fleet-member", "fa")
	if code != 1 || !strings.Contains(errOut, "NO_DELX_FLEET") || !strings.Contains(errOut, "[agent.delx_fleet.UPSTREAM]") {
		t.Fatalf("d (no fleet): exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = show("b", "--upstream", "delx"); code != 2 || !strings.Contains(errOut, "--fleet-member") {
		t.Fatalf("--upstream alone: exit %d %s", code, errOut)
	}

	// What a fellow member's capsule carries is untrusted.
	secret := "gh" + "p_x7Kq9Lm2Np4Rs6Tv8Wy0Ab3Cd5Ef7Gh9Ij1K" // a credential shape, put together so no scanner takes it for one
	fake.PlantFleetCapsule("alpha", "fe", json.RawMessage(`{"version":"1","goal":"look \u001b]8;;http://x\u0007here\u202e","next":"use `+secret+`"}`))
	fake.PlantFleetCapsule("alpha", "ff", json.RawMessage(`{"version":"1","goal":"fine","mood":"extra field"}`))
	code, out, errOut = show("b", "--fleet-member", "fe")
	outputs.WriteString(out + errOut)
	if code != 0 || strings.ContainsAny(out+errOut, "\x1b\x07\u202e") || strings.Contains(out, secret) || !strings.Contains(out, "here") {
		t.Fatalf("a hostile member's capsule: exit %d\n%q\n%q", code, out, errOut)
	}
	resp, err = c.Get("http://d/v1/capsule?agent=b&fleet_member=ff")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !bytes.Contains(body, []byte("REMOTE_CAPSULE_INVALID")) || bytes.Contains(body, []byte("extra field")) {
		t.Fatalf("a member's capsule failing the schema: %d %s", resp.StatusCode, body)
	}
	if !bytes.Contains(body, []byte("mood")) {
		t.Errorf("the refusal does not name the field at fault: %s", body)
	}

	// The invite token went to Delx only: a's and b's calls carried it, and
	// nothing else holds it.
	carried := 0
	for _, call := range fake.Calls() {
		if call.InviteToken == invite {
			carried++
		}
	}
	if carried < 2 {
		t.Fatalf("the invite token reached Delx %d times", carried)
	}
	var seen strings.Builder
	seen.WriteString(p.stderr.String())
	seen.WriteString(outputs.String())
	for _, path := range []string{"/v1/status", "/v1/continuity?agent=a&peek=1", "/v1/continuity?agent=b&peek=1"} {
		raw, _ := json.Marshal(get(t, c, path))
		seen.Write(raw)
	}
	filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			seen.Write(b)
		}
		return nil
	})
	if strings.Contains(seen.String(), invite) {
		t.Error("the invite token is in a log, the state directory, status, resume or a command's output")
	}
	p.terminate(t)
}
