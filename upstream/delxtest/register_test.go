package delxtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

const regKey = "reg-key-for-tests"

type regAnswer struct {
	AgentID      string `json:"agent_id"`
	SessionID    string `json:"session_id"`
	IdentityAuth struct {
		Token string `json:"token"`
	} `json:"identity_auth"`
	Error struct {
		Code string `json:"code"`
	} `json:"error"`
}

func register(t *testing.T, s *delxtest.Server, body string) (int, regAnswer, http.Header) {
	t.Helper()
	resp, err := http.Post(s.RegistrationURL(), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a regAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a, resp.Header
}

func TestRegistration(t *testing.T) {
	s := newFake(t, delxtest.Options{RegistrationKey: regKey})
	defer http.DefaultClient.CloseIdleConnections()
	for body, want := range map[string]string{
		`{"agent_id":"bot-1","registration_key":"wrong","source":"t"}`:                "INVALID_REGISTRATION_KEY",
		`{"agent_id":"bot-1","source":"t"}`:                                           "MISSING_FIELD",
		`{"agent_id":"","registration_key":"` + regKey + `","source":"t"}`:            "MISSING_FIELD",
		`{"agent_id":"bot-1","registration_key":"` + regKey + `"}`:                    "MISSING_FIELD",
		`{"agent_id":"bot-1","registration_key":"` + regKey + `","x":1,"source":"t"}`: "INVALID_REQUEST",
		`{"agent_id":"bot 1","registration_key":"` + regKey + `","source":"t"}`:       "INVALID_AGENT_ID",
	} {
		if status, a, _ := register(t, s, body); status/100 != 4 || a.Error.Code != want {
			t.Errorf("%s: %d %q, want %s", body, status, a.Error.Code, want)
		}
	}
	status, a, _ := register(t, s, `{"agent_id":"bot-1","registration_key":"`+regKey+`","source":"t"}`)
	if status != 200 || a.AgentID != "bot-1" || a.SessionID == "" || a.IdentityAuth.Token == "" {
		t.Fatalf("registration: %d %+v", status, a)
	}
	regs := s.Registrations()
	if last := regs[len(regs)-1]; last.Result != "ok" || last.Token != a.IdentityAuth.Token || last.SessionID != a.SessionID {
		t.Fatalf("recorded %+v", last)
	}
	for _, r := range regs {
		if strings.Contains(r.Token+r.AgentID+r.Source, regKey) {
			t.Fatal("the registration key was recorded")
		}
	}

	// The issued identity works, with its own session only.
	cs := connect(t, s, "bot-1", a.IdentityAuth.Token)
	for session, want := range map[string]string{
		a.SessionID:   "",
		"s1":          "SESSION_NOT_OWNED",
		"made-up":     "SESSION_NOT_FOUND",
		"continuityd": "SESSION_NOT_FOUND",
	} {
		for _, tool := range []string{"leave_hive_note", "close_session"} {
			res, text := callTool(t, cs, tool, map[string]any{"session_id": session, "capsule": goodCapsule})
			switch {
			case want == "" && res.IsError:
				t.Errorf("%s on its own session: %s", tool, text)
			case want != "" && (!res.IsError || !strings.Contains(string(mustJSON(t, res.StructuredContent)), want)):
				t.Errorf("%s on session %q: %v %s, want %s", tool, session, res.IsError, text, want)
			}
		}
	}

	// Registering again issues a new token; the old one stops working.
	_, b, _ := register(t, s, `{"agent_id":"bot-1","registration_key":"`+regKey+`","source":"t"}`)
	if b.IdentityAuth.Token == a.IdentityAuth.Token || b.SessionID == a.SessionID {
		t.Fatalf("registered again: %+v", b)
	}
	if resp := post(t, s.URL(), creds("bot-1", a.IdentityAuth.Token), initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("old token: %d", resp.StatusCode)
	}
	if resp := post(t, s.URL(), creds("bot-1", b.IdentityAuth.Token), initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("new token: %d", resp.StatusCode)
	}
}

func TestRegistrationDisabled(t *testing.T) {
	s := newFake(t, delxtest.Options{})
	defer http.DefaultClient.CloseIdleConnections()
	if status, _, _ := register(t, s, `{}`); status != http.StatusNotFound {
		t.Errorf("disabled: %d", status)
	}
}

func TestRegistrationRateLimited(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s2 := newFake(t, delxtest.Options{RegistrationKey: regKey, Limit: 2, Window: time.Minute, RateLimitStyle: delxtest.StyleBoth})
	for range 2 {
		register(t, s2, `{"agent_id":"x","registration_key":"wrong","source":"t"}`)
	}
	status, _, h := register(t, s2, `{"agent_id":"x","registration_key":"`+regKey+`","source":"t"}`)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("third registration: %d %v", status, h)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
