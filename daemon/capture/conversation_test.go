package capture

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestSnapshotRecordsTheConversationPoint: a snapshot taken while a real
// Claude Code transcript is followed records its session and the uuid of
// the last entry read (found here by the transcript package's own
// tracker); after more of the conversation, the next snapshot records the
// later message.
func TestSnapshotRecordsTheConversationPoint(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	before, after, _, _ := autocompact(t)
	pointAfter := func(text string) snapshot.Conversation {
		tr := transcript.NewTracker(transcript.ClaudeCode)
		for l := range strings.SplitSeq(text, "\n") {
			tr.Line([]byte(l))
		}
		st := tr.State()
		if st.SessionID == "" || st.LastMessageID == "" {
			t.Fatalf("fixture changed: no session or message id (%q, %q)", st.SessionID, st.LastMessageID)
		}
		return snapshot.Conversation{Session: st.SessionID, Message: st.LastMessageID}
	}
	want1, want2 := pointAfter(before), pointAfter(before+after)
	if want1.Message == want2.Message {
		t.Fatal("fixture changed: the second part adds no message")
	}

	o, proj := transcriptOptions(t)
	path := filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, path, before)
	r, st := startWithSnapshots(t, o)

	takeAt := func(want snapshot.Conversation, content string) {
		t.Helper()
		testwait.Until(t, func() string {
			return fmt.Sprintf("the follower stands at %+v, want %+v", r.transcripts.conversationPoint(), want)
		}, func() bool { return r.transcripts.conversationPoint() == want })
		writeFile(t, filepath.Join(o.Workdir, "work.txt"), content)
		snap, _, err := st.Take(context.Background(), "quiet", 1)
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.Show(context.Background(), snap.ID)
		if err != nil || d.Conversation == nil || *d.Conversation != want {
			t.Fatalf("snapshot %s records %+v (%v), want %+v", snap.ID, d.Conversation, err, want)
		}
	}
	takeAt(want1, "one\n")
	appendFile(t, path, after)
	takeAt(want2, "two\n")
}
