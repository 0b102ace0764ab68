package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// TestStatuslineFallsBackToTheTranscript: a real daemon reads a real
// Claude Code transcript of its workdir and knows the context used; a
// statusline payload without context_window (Claude Code's documented
// shape before it had one) then shows that figure, saying it is the
// transcript's, where the line said "ctx ?".
func TestStatuslineFallsBackToTheTranscript(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "daemon", "sources", "transcript", "testdata", "transcript-autocompact-opus46-v2.1.39.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tr := transcript.NewTracker(transcript.ClaudeCode)
	for l := range strings.SplitSeq(string(raw), "\n") {
		tr.Line([]byte(l))
	}
	session := tr.State().SessionID
	w, work := snapshotWorkspace(t, "")
	claude := filepath.Join(w.dir, "claude")
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[transcripts]\nclaude_home = %q\n", claude)
	f.Close()
	writeFile(t, transcript.ClaudeProjectDir(claude, work), session+".jsonl", string(raw))

	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "front", "statusline", "testdata", "statusline-docs-2025-08-no-context-window.json"))
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]any
	if err := json.Unmarshal(b, &payload); err != nil {
		t.Fatal(err)
	}
	payload["session_id"], payload["cwd"] = session, work
	payload["transcript_path"] = filepath.Join(transcript.ClaudeProjectDir(claude, work), session+".jsonl")
	payload["workspace"] = map[string]any{"current_dir": work, "project_dir": work}
	pb, _ := json.Marshal(payload)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	var ctx map[string]any
	waitUntil(t, func() string {
		return fmt.Sprintf("the transcript's usage never reached the resume (%v); log:\n%s", ctx, p.stderr)
	}, func() bool {
		ctx, _ = get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)
		return ctx != nil && ctx["used_fraction"] != nil
	})
	if ctx["via"] != "transcript" {
		t.Fatalf("the resume's context names %v as its source, want transcript: %v", ctx["via"], ctx)
	}
	want := fmt.Sprintf("ctx %.0f%% (transcript) · ", ctx["used_fraction"].(float64)*100)
	code, out, errs := cli(t, env, string(pb), "statusline")
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("statusline of a payload without context_window: exit %d %q %q, want it to start %q", code, out, errs, want)
	}
	// Another session's figure is not this one's.
	payload["session_id"] = "another-session"
	pb, _ = json.Marshal(payload)
	if code, out, _ := cli(t, env, string(pb), "statusline"); code != 0 || !strings.HasPrefix(out, "ctx ? · ") {
		t.Fatalf("statusline of another session: exit %d %q, want ctx ?", code, out)
	}
}
