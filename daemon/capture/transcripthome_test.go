package capture

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// TestTranscriptHomeMadeAfterStartFollowedByWatch: Claude Code installed
// after the daemon started (no ~/.claude at all when the follower first
// looked) and its first session in the workdir are followed with no
// rescan timer (transcripts.rescan 0): the folder above the missing home
// is watched, so the daemon needs no timer per place to notice it. A
// daemon of fifty places, each rescanning every 30 s for it, never slept.
func TestTranscriptHomeMadeAfterStartFollowedByWatch(t *testing.T) {
	raw, want := planSample(t, "claude-todowrite-v2.0.14-jnarowski-agentcmd")
	o, proj := transcriptOptions(t) // its home not made
	o.Transcripts.Rescan = 0
	if _, err := os.Lstat(o.Transcripts.ClaudeHome); !os.IsNotExist(err) {
		t.Fatalf("the home exists before the start: %v", err)
	}
	r := startCapture(t, o)
	waitHealth(t, r.Capture, "ok: no session yet; watching "+proj)
	session := filepath.Join(proj, "00000000-0000-4000-8000-000000000004.jsonl")
	writeFile(t, session, string(raw)) // makes the home, its projects folder and the project's
	waitResume(t, r.store, "the new session's plan", func(res capsule.Resume) bool { return slices.Equal(res.Plan, want) })
	waitHealth(t, r.Capture, "ok: following "+session)
}
