package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAgentDelxFleet(t *testing.T) {
	c := mustDecode(t, delxAgent(`[agent.delx_fleet.d]`, `fleet_id = "acme-builders"`, `token_file = "~/delx/acme.invite"`))
	want := map[string]DelxFleet{"d": {FleetID: "acme-builders", TokenFile: "/home/u/delx/acme.invite"}}
	if !reflect.DeepEqual(c.Agents[0].DelxFleet, want) {
		t.Fatalf("delx_fleet = %+v", c.Agents[0].DelxFleet)
	}
	// The invite token may be left out once the agent has joined.
	c = mustDecode(t, delxAgent(`[agent.delx_fleet.d]`, `fleet_id = "acme-builders"`))
	if tok, err := c.Agents[0].DelxFleet["d"].InviteToken(); err != nil || tok != "" {
		t.Fatalf("no invite token: %q %v", tok, err)
	}
	if c = mustDecode(t, delxAgent()); c.Agents[0].DelxFleet != nil {
		t.Fatalf("no fleet: %+v", c.Agents[0].DelxFleet)
	}
}

func TestAgentDelxFleetErrors(t *testing.T) {
	fl := func(lines ...string) string { return delxAgent(append([]string{`[agent.delx_fleet.d]`}, lines...)...) }
	runErrCases(t, []errCase{
		{"not an upstream of the agent", delxAgent(`[agent.delx_fleet.x]`, `fleet_id = "f"`),
			"agent[0].delx_fleet.x", 14, 2, `does not ship to upstream "x"`},
		{"not delx", delxAgent(`[agent.delx_fleet.q]`, `fleet_id = "f"`),
			"agent[0].delx_fleet.q", 14, 2, `only Delx has fleets of agents`},
		{"fleet_id missing", fl(`token_env = "T"`), "agent[0].delx_fleet.d", 14, 2, "fleet_id is required"},
		{"two tokens", fl(`fleet_id = "f"`, `token_env = "T"`, `token_file = "/t"`), "agent[0].delx_fleet.d.token_file", 17, 1, "not both"},
		{"token_env is a token", fl(`fleet_id = "f"`, `token_env = "inv-123"`), "agent[0].delx_fleet.d.token_env", 16, 1, "not the invite token itself"},
		{"token_file relative", fl(`fleet_id = "f"`, `token_file = "t"`), "agent[0].delx_fleet.d.token_file", 16, 1, "absolute"},
		{"fleet_id with a space", fl(`fleet_id = "a b"`), "agent[0].delx_fleet.d.fleet_id", 15, 1, `without spaces, as Delx names the fleet (got "a b")`},
		{"fleet_id too long", fl(`fleet_id = "` + strings.Repeat("f", 201) + `"`), "agent[0].delx_fleet.d.fleet_id", 15, 1, "longer than 200"},
		{"the token in the file", fl(`fleet_id = "f"`, `invite_token = "inv-123"`), "agent[0].delx_fleet.d.invite_token", 16, 1, "unknown key; known here: fleet_id, token_env, token_file"},
		{"wrong type", fl(`fleet_id = 7`), "agent[0].delx_fleet.d.fleet_id", 15, 1, "must be a string (got 7)"},
	})
}

func TestDelxFleetInviteToken(t *testing.T) {
	t.Setenv("CD_TEST_INVITE", " inv-1 \n")
	if tok, err := (DelxFleet{FleetID: "f", TokenEnv: "CD_TEST_INVITE"}).InviteToken(); err != nil || tok != "inv-1" {
		t.Fatalf("env: %q %v", tok, err)
	}
	f := filepath.Join(t.TempDir(), "inv")
	if err := os.WriteFile(f, []byte("inv-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Config{Agents: []Agent{{Name: "a", DelxFleet: map[string]DelxFleet{"d": {FleetID: "f", TokenFile: f}}}}}
	if errs := c.CheckSecretFiles(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "agent.a.delx_fleet.d.token_file") || strings.Contains(errs[0].Error(), "inv-2") {
		t.Fatalf("an open invite file: %v", errs)
	}
	os.Chmod(f, 0o600)
	if tok, err := (DelxFleet{FleetID: "f", TokenFile: f}).InviteToken(); err != nil || tok != "inv-2" {
		t.Fatalf("file: %q %v", tok, err)
	}
	if errs := c.CheckSecretFiles(); len(errs) != 0 {
		t.Fatal(errs)
	}
}
