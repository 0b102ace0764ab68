package daemon

import (
	"testing"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/capture"
)

// Agents on one workdir share its transcript claims; another workdir has
// its own, and an agent without a workdir has none (nil: alone).
func TestWorkdirTranscriptsOnePerWorkdir(t *testing.T) {
	var w workdirTranscripts
	a, b, c := w.For("/srv/work"), w.For("/srv/work/"), w.For("/srv/other")
	if a == nil || a != b {
		t.Fatalf("two agents on /srv/work got claims %p and %p, want one", a, b)
	}
	if c == nil || c == a {
		t.Fatalf("/srv/other got %p, want its own (not %p)", c, a)
	}
	if w.For("") != nil {
		t.Fatal("an agent without a workdir got claims")
	}
}

// An agent's transcript key becomes its capture's kind of transcript:
// "off" turns its follower off, "auto" follows either kind.
func TestAgentTranscriptKey(t *testing.T) {
	cfg := testConfig(t)
	cfg.Transcripts = config.Transcripts{Enabled: true, ClaudeHome: "/h/.claude", CodexHome: "/h/.codex"}
	for key, want := range map[string]capture.TranscriptOptions{
		config.TranscriptAuto:       {Enabled: true},
		config.TranscriptClaudeCode: {Enabled: true, Kind: capture.KindClaudeCode},
		config.TranscriptCodex:      {Enabled: true, Kind: capture.KindCodex},
		config.TranscriptOff:        {Enabled: false},
	} {
		ac := cfg.Agents[0]
		ac.Transcript = key
		got := captureOptions(cfg, ac).Transcripts
		if got.Enabled != want.Enabled || got.Kind != want.Kind || got.ClaudeHome != "/h/.claude" || got.CodexHome != "/h/.codex" {
			t.Errorf("transcript = %q: %+v, want enabled %v kind %q", key, got, want.Enabled, want.Kind)
		}
	}
}
