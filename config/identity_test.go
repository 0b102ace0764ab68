package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// delxAgent is a config with agent "a" shipping to a delx upstream "d",
// then the given lines (inside [agent.identity.d] when they follow it).
func delxAgent(lines ...string) string {
	return src(append([]string{
		`[upstream.d]`, `kind = "delx"`, `url = "https://delx.example/v1/mcp"`, ``,
		`[upstream.q]`, `kind = "qday"`, `url = "https://q.example"`, `token_env = "Q"`, ``,
		`[[agent]]`, `name = "a"`, `upstreams = ["d", "q"]`, ``,
	}, lines...)...)
}

func TestAgentIdentity(t *testing.T) {
	c := mustDecode(t, delxAgent(
		`[agent.identity.d]`, `agent_id = "builder-7f3a"`, `session_id = "sess_9c1e"`, `token_file = "~/delx/builder.token"`,
	))
	want := map[string]DelxIdentity{"d": {AgentID: "builder-7f3a", SessionID: "sess_9c1e", TokenFile: "/home/u/delx/builder.token"}}
	if !reflect.DeepEqual(c.Agents[0].Identity, want) {
		t.Fatalf("identity = %+v", c.Agents[0].Identity)
	}
	// A delx upstream needs no token of its own; an agent needs no identity.
	c = mustDecode(t, delxAgent())
	if c.Upstreams["d"].HasToken() || c.Agents[0].Identity != nil {
		t.Fatalf("%+v %+v", c.Upstreams["d"], c.Agents[0])
	}
	// The older shared token is still accepted, and checked.
	mustDecode(t, src(`[upstream.delx]`, `url = "https://delx.example/v1/mcp"`, `token_env = "DELX_TOKEN"`,
		`registration_url = "https://delx.example/api/v1/agents/register"`))
	// Inline tables are the same thing.
	c = mustDecode(t, src(`[upstream.d]`, `kind = "delx"`, `url = "https://delx.example/v1/mcp"`,
		`[[agent]]`, `name = "a"`, `upstreams = ["d"]`, `identity = { d = { agent_id = "x", session_id = "y", token_env = "T" } }`))
	if c.Agents[0].Identity["d"].TokenEnv != "T" {
		t.Fatalf("inline identity = %+v", c.Agents[0].Identity)
	}
}

func TestAgentIdentityErrors(t *testing.T) {
	id := func(lines ...string) string { return delxAgent(append([]string{`[agent.identity.d]`}, lines...)...) }
	runErrCases(t, []errCase{
		{"not an upstream of the agent", delxAgent(`[agent.identity.x]`, `agent_id = "i"`, `session_id = "s"`, `token_env = "T"`),
			"agent[0].identity.x", 14, 2, `does not ship to upstream "x"`},
		{"not delx", delxAgent(`[agent.identity.q]`, `agent_id = "i"`, `session_id = "s"`, `token_env = "T"`),
			"agent[0].identity.q", 14, 2, `only delx upstreams take an agent identity`},
		{"agent_id missing", id(`session_id = "s"`, `token_env = "T"`), "agent[0].identity.d", 14, 2, "agent_id is required"},
		{"session_id missing", id(`agent_id = "i"`, `token_env = "T"`), "agent[0].identity.d", 14, 2, "session_id is required"},
		{"token missing", id(`agent_id = "i"`, `session_id = "s"`), "agent[0].identity.d", 14, 2, "needs token_env"},
		{"two tokens", id(`agent_id = "i"`, `session_id = "s"`, `token_env = "T"`, `token_file = "/t"`), "agent[0].identity.d.token_file", 18, 1, "not both"},
		{"token_env is a token", id(`agent_id = "i"`, `session_id = "s"`, `token_env = "dxt-123"`), "agent[0].identity.d.token_env", 17, 1, "not the token itself"},
		{"token_file relative", id(`agent_id = "i"`, `session_id = "s"`, `token_file = "t"`), "agent[0].identity.d.token_file", 17, 1, "absolute"},
		{"agent_id with a space", id(`agent_id = "a b"`, `session_id = "s"`, `token_env = "T"`), "agent[0].identity.d.agent_id", 15, 1, `without spaces, as Delx issued it (got "a b")`},
		{"session_id too long", id(`agent_id = "i"`, `session_id = "`+strings.Repeat("s", 201)+`"`, `token_env = "T"`), "agent[0].identity.d.session_id", 16, 1, "longer than 200"},
		{"unknown key", id(`agent_id = "i"`, `session_id = "s"`, `token = "T"`), "agent[0].identity.d.token", 17, 1, "unknown key; known here: agent_id, session_id, token_env, token_file"},
		{"wrong type", id(`agent_id = 7`, `session_id = "s"`, `token_env = "T"`), "agent[0].identity.d.agent_id", 15, 1, "must be a string (got 7)"},
		{"registration_url on qday", src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "Q"`, `registration_url = "https://q.example/r"`),
			"upstream.qday.registration_url", 4, 1, "only a delx upstream"},
		{"registration_url plain http", src(`[upstream.delx]`, `url = "https://d.example"`, `registration_url = "http://d.example/r"`),
			"upstream.delx.registration_url", 3, 1, "loopback"},
		{"shared token still checked", src(`[upstream.delx]`, `url = "https://d.example"`, `token_env = "sk-live-1"`),
			"upstream.delx.token_env", 3, 1, "not the token itself"},
	})
}

func TestDelxIdentityToken(t *testing.T) {
	t.Setenv("CD_TEST_ID_TOKEN", " tok-1 \n")
	if tok, err := (DelxIdentity{TokenEnv: "CD_TEST_ID_TOKEN"}).Token(); err != nil || tok != "tok-1" {
		t.Fatalf("env: %q %v", tok, err)
	}
	f := filepath.Join(t.TempDir(), "t")
	if err := os.WriteFile(f, []byte("tok-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (DelxIdentity{TokenFile: f}).Token(); err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "tok-2") {
		t.Fatalf("open token file: %v", err)
	}
	os.Chmod(f, 0o600)
	if tok, err := (DelxIdentity{TokenFile: f}).Token(); err != nil || tok != "tok-2" {
		t.Fatalf("file: %q %v", tok, err)
	}
	if s, err := ReadSecretFile(f); err != nil || s != "tok-2" {
		t.Fatalf("ReadSecretFile: %q %v", s, err)
	}
	if _, err := (DelxIdentity{}).Token(); err == nil || !strings.Contains(err.Error(), "neither token_env nor token_file") {
		t.Fatalf("none: %v", err)
	}
}

func TestIdentityKeyPaths(t *testing.T) {
	for path, want := range map[string]string{
		"agent[2].identity.delx.agent_id": "agent[].identity.*.agent_id",
		`agent[0].identity."d x"`:         "agent[].identity.*",
		"agent[0].identity":               "agent[].identity",
	} {
		if got := schemaKey(path); got != want {
			t.Errorf("schemaKey(%s) = %s, want %s", path, got, want)
		}
	}
}
