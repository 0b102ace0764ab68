package transcript

import "testing"

func TestDetectFormat(t *testing.T) {
	for name, want := range map[string]Format{
		spotter:   ClaudeCode, // file-history-snapshot first
		fasthooks: ClaudeCode,
		shepherd:  ClaudeCode, // ai-title first
		short:     ClaudeCode,
		claudeCat: ClaudeCode,
		acompact:  ClaudeCode,
		sidechain: ClaudeCode,
		codex104:  Codex,
		codex125:  Codex,
		codexCat:  Codex,
	} {
		got, ok := DetectFormat(fixtureLines(t, name)[0])
		if !ok || got != want {
			t.Errorf("%s: %v %v, want %v", name, got, ok, want)
		}
	}
	for _, l := range []string{
		``, `not json`, `[]`, `{`, `{}`, `{"foo":1}`, `{"type":""}`, `{"type":7}`,
		`{"type":"event_msg"}`, `{"type":"session_meta","payload":"x"}`,
	} {
		if f, ok := DetectFormat([]byte(l)); ok {
			t.Errorf("%q detected as %v", l, f)
		}
	}
	if f, ok := DetectFormat([]byte(`{"type":"summary","summary":"t","leafUuid":"u"}`)); !ok || f != ClaudeCode {
		t.Errorf("summary line: %v %v", f, ok)
	}
	if ClaudeCode.String() != "claude-code" || Codex.String() != "codex" || Format(0).String() != "unknown" {
		t.Error("Format.String")
	}
}
