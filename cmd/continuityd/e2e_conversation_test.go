package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestSnapshotNamesTheConversationPoint: a real daemon follows a real
// Claude Code transcript of its workdir; a snapshot taken after it was
// read records the session and the uuid of the last entry (found here by
// the transcript package's own tracker), and GET /v1/snapshots/{id}, its
// work record and `snapshot show` name them.
func TestSnapshotNamesTheConversationPoint(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "daemon", "sources", "transcript", "testdata", "transcript-autocompact-opus46-v2.1.39.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tr := transcript.NewTracker(transcript.ClaudeCode)
	for l := range strings.SplitSeq(string(raw), "\n") {
		tr.Line([]byte(l))
	}
	session, message := tr.State().SessionID, tr.State().LastMessageID
	if session == "" || message == "" {
		t.Fatal("fixture changed: no session or message id")
	}

	w, work := snapshotWorkspace(t, "")
	claude := filepath.Join(w.dir, "claude")
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[transcripts]\nclaude_home = %q\n", claude)
	f.Close()
	writeFile(t, work, "a.go", "a1\n")
	proj := transcript.ClaudeProjectDir(claude, work)
	writeFile(t, proj, session+".jsonl", string(raw))

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	var start []string
	waitUntil(t, func() string { return fmt.Sprintf("no start snapshot (%v); log:\n%s", start, p.stderr) },
		func() bool { start = listedSnapshots(t, p); return len(start) >= 1 })
	// The transcript is read once the resume has its context usage.
	waitUntil(t, func() string { return "the transcript's usage never reached the resume; log:\n" + p.stderr.String() }, func() bool {
		ctx, _ := get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)
		return ctx != nil && ctx["used_fraction"] != nil
	})

	writeFile(t, work, "a.go", "a2\n")
	var ids []string
	waitUntil(t, func() string { return fmt.Sprintf("no snapshot after the edit (%v); log:\n%s", ids, p.stderr) },
		func() bool { ids = listedSnapshots(t, p); return len(ids) > len(start) })
	d := get(t, c, "/v1/snapshots/"+ids[0])
	conv, _ := d["conversation"].(map[string]any)
	if conv == nil || conv["session"] != session || conv["message"] != message {
		t.Fatalf("snapshot %s names the conversation %v, want session %s message %s", ids[0], d["conversation"], session, message)
	}
	rec := waitWork(t, filepath.Join(w.state, "agents", "builder"), testwait.Limit, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && wk.Snapshot.ID == ids[0]
	}).Work.Snapshot
	if rec.Conversation == nil || rec.Conversation.Session != session || rec.Conversation.Message != message {
		t.Fatalf("the work record of %s names the conversation %+v, want session %s message %s", ids[0], rec.Conversation, session, message)
	}
	code, out, errOut := cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "show", ids[0])
	if want := "conversation: session " + session + ", last message " + message; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("snapshot show (exit %d): want %q in\n%s%s", code, want, out, errOut)
	}
}
