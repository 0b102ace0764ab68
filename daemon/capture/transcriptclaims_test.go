package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// following is the transcript r follows now ("" : none).
func following(r *running) string {
	r.transcripts.mu.Lock()
	defer r.transcripts.mu.Unlock()
	return r.transcripts.path
}

// TestTranscriptOneAgentEach: two agents on one workdir, both following
// "auto" (Claude Code's and Codex's homes), one TranscriptClaims. The
// workdir has a Claude Code session and a newer Codex rollout: each agent
// follows one, never the same one. A hook of one agent naming the other's
// transcript binds it: the other lets go and takes the one left. Then a
// real Claude Edit line and a real Codex apply_patch line are each
// credited to the agent that follows their file, never to the other.
func TestTranscriptOneAgentEach(t *testing.T) {
	ledger, claims := attribution.New(attribution.Options{}), &TranscriptClaims{}
	claude, codex := filepath.Join(t.TempDir(), "claude"), filepath.Join(t.TempDir(), "codex")
	ob := testOptions(t)
	wd := ob.Workdir
	ob.Transcripts = TranscriptOptions{Enabled: true, ClaudeHome: claude, CodexHome: codex}
	var shared watch.Shared // as the daemon gives them: one watcher, each burst credited once
	ob.Attribution, ob.TranscriptClaims, ob.Watches = ledger, claims, &shared
	or := testOptions(t)
	or.Agent, or.Workdir, or.Transcripts, or.Attribution, or.TranscriptClaims, or.Watches = "reviewer", wd, ob.Transcripts, ledger, claims, &shared

	session := filepath.Join(transcript.ClaudeProjectDir(claude, wd), "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, session, "")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(session, old, old); err != nil {
		t.Fatal(err)
	}
	rollout, patchLine := codexRollout(t, codex, wd) // the newest
	builder, reviewer := startCapture(t, ob), startCapture(t, or)

	var b, r string
	testwait.Until(t, func() string {
		return fmt.Sprintf("each agent following its own transcript; builder follows %q, reviewer %q", b, r)
	}, func() bool { b, r = following(builder), following(reviewer); return b != "" && r != "" && b != r })

	// Reviewer's hook names builder's transcript: it is reviewer's now.
	reviewer.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(), TranscriptPath: b})
	testwait.Until(t, func() string {
		return fmt.Sprintf("reviewer on %q and builder, let go, on %q; they follow %q and %q", b, r, following(reviewer), following(builder))
	}, func() bool { return following(reviewer) == b && following(builder) == r })
	if claims.TakenFrom("reviewer", b) || !claims.TakenFrom("builder", b) {
		t.Errorf("the claims do not say %q is reviewer's", b)
	}

	who := map[string]string{b: "reviewer", r: "builder"}
	appendFile(t, session, claudeEditLines(t, filepath.Join(wd, "src", "claude.go")))
	writeFile(t, filepath.Join(wd, "src", "claude.go"), "package src\n")
	appendFile(t, rollout, patchLine("src/codex.go"))
	writeFile(t, filepath.Join(wd, "src", "codex.go"), "package src\n")
	waitCredit(t, ledger, "src/claude.go", who[session])
	waitCredit(t, ledger, "src/codex.go", who[rollout])
	for _, c := range ledger.ChangesSince(time.Time{}) {
		if (c.Path == "src/claude.go" && c.By != who[session]) || (c.Path == "src/codex.go" && c.By != who[rollout]) {
			t.Errorf("%s credited to %q as well", c.Path, c.By)
		}
	}
}

// TestTranscriptKindPicksTheHome: an agent whose transcript key names
// Claude Code follows the workdir's Claude Code session although a Codex
// rollout is newer, and one that names Codex the rollout; a hook naming a
// transcript of the other kind is not followed.
func TestTranscriptKindPicksTheHome(t *testing.T) {
	claude, codex := filepath.Join(t.TempDir(), "claude"), filepath.Join(t.TempDir(), "codex")
	oc := testOptions(t)
	oc.Watch.Enabled = false
	wd := oc.Workdir
	oc.Transcripts = TranscriptOptions{Enabled: true, ClaudeHome: claude, CodexHome: codex, Kind: KindClaudeCode}
	ox := testOptions(t)
	ox.Watch.Enabled = false
	ox.Agent, ox.Workdir, ox.Transcripts = "reviewer", wd, oc.Transcripts
	ox.Transcripts.Kind = KindCodex

	session := filepath.Join(transcript.ClaudeProjectDir(claude, wd), "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, session, "")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(session, old, old); err != nil {
		t.Fatal(err)
	}
	rollout, _ := codexRollout(t, codex, wd)
	cc, cx := startCapture(t, oc), startCapture(t, ox)
	waitHealth(t, cc.Capture, "ok: following "+session)
	waitHealth(t, cx.Capture, "ok: following "+rollout)
	if cx.transcripts.allowed(session) || !cx.transcripts.allowed(rollout) || cc.transcripts.allowed(rollout) {
		t.Error("a hook's transcript of the other kind would be followed")
	}
}

// A nil TranscriptClaims is an agent alone: everything is free. Shared,
// a guess gives way to another agent's binding, whose loser is woken; a
// guess never takes what another holds; a release frees it.
func TestTranscriptClaimsRules(t *testing.T) {
	var alone *TranscriptClaims
	alone.Bind("a", "/t/x.jsonl")
	alone.Release("a")
	alone.listen("a", func() {})
	if !alone.Guess("a", "/t/x.jsonl") || alone.TakenFrom("b", "/t/x.jsonl") {
		t.Fatal("a nil TranscriptClaims is not free for all")
	}

	c := &TranscriptClaims{}
	woken := 0
	c.listen("b", func() { woken++ })
	if !c.Guess("b", "/t/x.jsonl") || c.Guess("a", "/t/x.jsonl") || !c.TakenFrom("a", "/t/x.jsonl/") || c.TakenFrom("b", "/t/x.jsonl") {
		t.Fatal("a guess is not the guesser's alone")
	}
	if holder := c.Bind("a", "/t/x.jsonl"); holder != "" {
		t.Fatalf("a's binding of b's guess refused, held by %q", holder)
	}
	if woken != 1 || !c.TakenFrom("b", "/t/x.jsonl") || c.Guess("b", "/t/x.jsonl") {
		t.Fatalf("after a's binding: b woken %d times, b may still take it", woken)
	}
	// A binding stays its agent's: b's hook naming it is refused.
	if holder := c.Bind("b", "/t/x.jsonl"); holder != "a" || c.BoundTo("b", "/t/x.jsonl") != "a" || !c.TakenFrom("b", "/t/x.jsonl") {
		t.Fatalf("b's binding of a's bound transcript: held by %q, want a", holder)
	}
	if !c.Guess("a", "/t/x.jsonl") {
		t.Fatal("a's own binding refuses a")
	}
	c.Release("a")
	if !c.Guess("b", "/t/x.jsonl") {
		t.Fatal("a released transcript stays taken")
	}
}
