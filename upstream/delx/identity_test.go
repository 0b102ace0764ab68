package delx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
	"github.com/continuityd/continuityd/upstream/delx"
	"github.com/continuityd/continuityd/upstream/delxtest"
)

const regKey = "delx-registration-key-0123"

func TestRegistrationURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.delx.ai/v1/mcp":      "https://api.delx.ai/api/v1/agents/register",
		"http://127.0.0.1:8080/x/v1/mcp?": "http://127.0.0.1:8080/api/v1/agents/register",
	} {
		if got, err := delx.RegistrationURL(in); err != nil || got != want {
			t.Errorf("RegistrationURL(%s) = %q, %v", in, got, err)
		}
	}
	if _, err := delx.RegistrationURL("/v1/mcp"); err == nil {
		t.Error("a relative url was accepted")
	}
}

func TestIdentityFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents", "a1")
	path := delx.IdentityPath(dir, "delx")
	if _, err := delx.ReadIdentityFile(path); !errors.Is(err, delx.ErrNotRegistered) {
		t.Fatalf("missing file: %v", err)
	}
	want := delx.StoredIdentity{AgentID: "a1", SessionID: "sess_1", Token: "dxt_secret_token_1", Upstream: "delx", RegisteredAt: time.Now().UTC().Round(0)}
	if err := delx.WriteIdentityFile(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	got, err := delx.ReadIdentityFile(path)
	if err != nil || got != want {
		t.Fatalf("read %+v, %v", got, err)
	}
	if err := delx.WriteIdentityFile(path, delx.StoredIdentity{AgentID: "a1", Token: "t"}); err == nil {
		t.Fatal("an identity without a session was written")
	}

	// Refused: open to others, a link, not the file's shape. No error
	// repeats the token.
	os.Chmod(path, 0o640)
	if _, err := delx.ReadIdentityFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("mode 0640: %v", err)
	}
	os.Chmod(path, 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(path, link)
	if _, err := delx.ReadIdentityFile(link); err == nil {
		t.Error("a symbolic link was followed")
	}
	for name, content := range map[string]string{
		"garbage":  `{"agent_id":"a1","token":"dxt_secret_token_1",`,
		"unknown":  `{"agent_id":"a1","session_id":"s","token":"dxt_secret_token_1","extra":1}`,
		"no token": `{"agent_id":"a1","session_id":"s"}`,
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(content), 0o600)
		_, err := delx.ReadIdentityFile(p)
		if err == nil || strings.Contains(err.Error(), "dxt_secret") || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRegister(t *testing.T) {
	t.Cleanup(func() { verifyNoLeaks(t) })
	fake := delxtest.New(delxtest.Options{RegistrationKey: regKey})
	defer fake.Close()
	ctx := context.Background()

	_, err := delx.Register(ctx, delx.Registration{URL: fake.RegistrationURL(), AgentID: "a1", Key: "wrong-key-for-delx", Source: "continuityd"})
	var re *delx.RegisterError
	if !errors.As(err, &re) || re.Status != 401 || re.Code != "INVALID_REGISTRATION_KEY" || !strings.Contains(err.Error(), "check the registration key") {
		t.Fatalf("wrong key: %v", err)
	}
	id, err := delx.Register(ctx, delx.Registration{URL: fake.RegistrationURL(), AgentID: "a1", Key: regKey, Source: "continuityd"})
	if err != nil {
		t.Fatal(err)
	}
	regs := fake.Registrations()
	if last := regs[len(regs)-1]; id.AgentID != "a1" || id.SessionID != last.SessionID || id.Token != last.Token || last.Source != "continuityd" {
		t.Fatalf("identity %+v, registration %+v", id, last)
	}
	// Nothing answers: the error names neither the key nor a token.
	_, err = delx.Register(ctx, delx.Registration{URL: "http://127.0.0.1:1/api/v1/agents/register", AgentID: "a1", Key: regKey, Source: "c", Timeout: 2 * time.Second})
	if err == nil || strings.Contains(err.Error(), regKey) {
		t.Fatalf("no server: %v", err)
	}
}

// A registered identity is what every call carries; registering again
// (a new agent_id) moves the agent to a new MCP session.
func TestCallsCarryTheRegisteredIdentity(t *testing.T) {
	t.Cleanup(func() { verifyNoLeaks(t) })
	fake := delxtest.New(delxtest.Options{RegistrationKey: regKey})
	defer fake.Close()
	ctx := context.Background()
	path := delx.IdentityPath(t.TempDir(), "delx")
	c, err := delx.New(delx.Options{Name: "delx", URL: fake.URL(), Identity: func(string) (delx.Identity, error) {
		s, err := delx.ReadIdentityFile(path)
		if errors.Is(err, delx.ErrNotRegistered) {
			return delx.Identity{}, errors.New("agent a1 is not registered: run continuityd delx register")
		}
		return s.Identity(), err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Not registered: Unauthorized, nothing sent, the way out named.
	err = c.Deliver(ctx, "a1", write(capsule.WriteCapsule, 1, testCapsule()))
	if ue := asUpstreamError(t, err); ue.Outcome != upstream.Unauthorized || !strings.Contains(err.Error(), "continuityd delx register") {
		t.Fatalf("unregistered: %v", err)
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("something was sent without an identity")
	}

	for i, agentID := range []string{"delx-a1", "delx-a1-new"} {
		id, err := delx.Register(ctx, delx.Registration{URL: fake.RegistrationURL(), AgentID: agentID, Key: regKey, Source: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if err := delx.WriteIdentityFile(path, delx.StoredIdentity{AgentID: id.AgentID, SessionID: id.SessionID, Token: id.Token}); err != nil {
			t.Fatal(err)
		}
		if err := c.Deliver(ctx, "a1", write(capsule.WriteSeal, uint64(2*i+1), testCapsule())); err != nil {
			t.Fatalf("%s: leave_hive_note: %v", agentID, err)
		}
		if err := c.Deliver(ctx, "a1", capsule.Write{Seq: uint64(2*i + 2), Kind: capsule.WriteSessionEnd, IdempotencyKey: "k", Reason: "logout"}); err != nil {
			t.Fatalf("%s: close_session: %v", agentID, err)
		}
		if _, err := c.Resume(ctx, "a1"); err != nil {
			t.Fatalf("%s: resume_session: %v", agentID, err)
		}
		calls := fake.Calls()
		for _, call := range calls[len(calls)-3:] {
			if call.Result != "ok" || call.AgentID != agentID || call.Header.Get(delx.HeaderAgentToken) != id.Token ||
				(call.Tool != delx.ToolResumeSession && call.SessionID != id.SessionID) {
				t.Errorf("%s: call %s %s as %s session %q", agentID, call.Tool, call.Result, call.AgentID, call.SessionID)
			}
		}
	}
	mcpSessions := map[string]bool{}
	for _, r := range fake.Requests() {
		if r.MCPSessionID != "" {
			mcpSessions[r.MCPSessionID] = true
		}
	}
	if len(mcpSessions) != 2 {
		t.Errorf("%d MCP sessions, want one per agent_id", len(mcpSessions))
	}
}

// A Delx tool error names Delx's code and message, for the dead letter and
// last_error.
func TestToolErrorCarriesCodeAndMessage(t *testing.T) {
	e := setup(t, envOpts{fake: delxtest.Options{AgentTokens: map[string]string{agent: token}, Sessions: map[string]string{"someone-elses": "agent-b"}}})
	err := deliver(t, e, write(capsule.WriteCapsule, 1, testCapsule()))
	ue := asUpstreamError(t, err)
	if ue.Outcome != upstream.Rejected || ue.Code != "SESSION_NOT_FOUND" || !strings.Contains(err.Error(), "SESSION_NOT_FOUND") ||
		!strings.Contains(err.Error(), "session_id is not a session Delx issued") || strings.Contains(err.Error(), token) {
		t.Fatalf("outcome %s code %q: %v", outcomeNames[ue.Outcome], ue.Code, err)
	}
	// A tool error whose text is a JSON error object gives its code too.
	e.fake.Script(delxtest.ToolError(`{"error":{"code":"CAPSULE_QUOTA","message":"16 hive keys per session"}}`))
	err = deliver(t, e, write(capsule.WriteCapsule, 2, testCapsule()))
	if ue := asUpstreamError(t, err); ue.Code != "CAPSULE_QUOTA" || !strings.Contains(err.Error(), "16 hive keys") {
		t.Fatalf("code %q: %v", ue.Code, err)
	}
}
