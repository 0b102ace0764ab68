package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGuardsOverTheSocket: through a real daemon, the control characters
// and credential shapes of issue 12 are refused with 400, the field and
// the rule or character named, nothing stored; ordinary prose about
// passwords is stored. Credentials are assembled at run time.
func TestGuardsOverTheSocket(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()

	tail := strings.Repeat("Qz7", 9) // 27 token characters
	dockerPAT := "dckr_pat_" + tail
	password := "Vb" + strings.Repeat("k9!", 4)
	redisPW := "kqzvwm"

	cases := []struct {
		name, path, method string
		body               any
		code, field, names string // names: what the message must name
		never              string // what nothing may echo
	}{
		{"DEL in working_state", "/v1/continuity/checkpoint", "POST",
			map[string]any{"working_state": map[string]any{"next_action": "swap\u007fcallsites"}},
			"INVALID_WORKING_STATE", "working_state.next_action", "U+007F", ""},
		{"CSI in focus", "/v1/continuity/checkpoint", "POST",
			map[string]any{"focus": "red \u009b31m text"}, "INVALID_FOCUS", "focus", "U+009B", ""},
		{"NEL in a capsule", "/v1/capsule", "PUT",
			map[string]any{"version": "1", "goal": "line\u0085next"}, "INVALID_CAPSULE", "goal", "U+0085", ""},
		{"right-to-left override in focus", "/v1/continuity/checkpoint", "POST",
			map[string]any{"focus": "open invoice\u202efdp.exe"}, "INVALID_FOCUS", "focus", "U+202E", ""},
		{"zero-width space in a commitment title", "/v1/continuity/checkpoint", "POST",
			map[string]any{"commitments": map[string]any{"open": []any{map[string]any{"title": "ship\u200b it"}}}},
			"INVALID_COMMITMENT", "commitments.open[0].title", "U+200B", ""},
		{"byte order mark in a capsule", "/v1/capsule", "PUT",
			map[string]any{"version": "1", "goal": "\ufeffbilling"}, "INVALID_CAPSULE", "goal", "U+FEFF", ""},
		{"NEL in a signal", "/v1/signals", "POST",
			map[string]any{"kind": "activity", "event": "tool", "reason": "x\u0085y"}, "INVALID_SIGNAL", "reason", "U+0085", ""},
		{"docker hub token in the public status", "/v1/continuity/checkpoint", "POST",
			map[string]any{"public_status": map[string]any{"phase": "acting", "next_action": "docker login -p " + dockerPAT}},
			"INVALID_PUBLIC_STATUS", "public_status.next_action", "continuityd-docker-hub-token", tail},
		{"password in words in the public status", "/v1/continuity/checkpoint", "POST",
			map[string]any{"public_status": map[string]any{"phase": "acting", "next_action": "the staging db password is " + password}},
			"INVALID_PUBLIC_STATUS", "public_status.next_action", "continuityd-password-phrase", password},
		{"password in words in focus", "/v1/continuity/checkpoint", "POST",
			map[string]any{"focus": "the staging db password is " + password},
			"SECRET_DETECTED", "focus", "continuityd-password-phrase", password},
		{"url password with an empty user in a capsule", "/v1/capsule", "PUT",
			map[string]any{"version": "1", "blockers": "cache at redis://:" + redisPW + "@cache.internal:6379 is down"},
			"SECRET_DETECTED", "blockers", "continuityd-url-password", redisPW},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := guardSend(t, c, tc.method, tc.path, tc.body)
			var m struct {
				Error struct{ Code, Field, Message string }
			}
			json.Unmarshal(raw, &m)
			if status != 400 || m.Error.Code != tc.code || m.Error.Field != tc.field || !strings.Contains(m.Error.Message, tc.names) {
				t.Fatalf("%d %s; want 400 %s at %s naming %s", status, raw, tc.code, tc.field, tc.names)
			}
			if tc.never != "" && bytes.Contains(raw, []byte(tc.never)) {
				t.Fatalf("the refusal echoes the value: %s", raw)
			}
		})
	}

	if status, raw := guardSend(t, c, "POST", "/v1/continuity/checkpoint",
		map[string]any{"focus": "the password is stored in vault; reset the password is the next step"}); status != 200 {
		t.Fatalf("ordinary prose refused: %d %s", status, raw)
	}
	_, resume := guardSend(t, c, "GET", "/v1/continuity?peek=1", nil)
	if !bytes.Contains(resume, []byte("the password is stored in vault")) {
		t.Fatalf("the accepted focus is not in the resume: %s", resume)
	}
	for _, s := range []string{tail, password, redisPW, "\u007f", "\u009b", "\u0085"} {
		if bytes.Contains(resume, []byte(s)) {
			t.Fatalf("a refused value was stored: %q in %s", s, resume)
		}
	}
}

func guardSend(t *testing.T, c *http.Client, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://d"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}
