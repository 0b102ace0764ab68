package snapshot

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// A store told where the conversation stands records it in each snapshot
// it takes (List and Show name it), drops ids that are not ids, and lists
// a snapshot an older daemon took (no conversation) beside them.
func TestConversationRecorded(t *testing.T) {
	ctx := context.Background()
	wd := t.TempDir()
	write(t, wd, "a.txt", "a\n")
	s := newStore(t, wd, Options{})
	first, _ := mustTake(t, s, "start", 1)
	if first.Conversation != nil {
		t.Fatalf("a snapshot with no conversation known records %+v", *first.Conversation)
	}
	point := Conversation{Session: "sess-1", Message: "msg 1"}
	s.SetConversation(func() Conversation { return point })
	write(t, wd, "a.txt", "b\n")
	second, _ := mustTake(t, s, "quiet", 2)
	if second.Conversation == nil || *second.Conversation != point {
		t.Fatalf("Take recorded %+v, want %+v", second.Conversation, point)
	}
	point = Conversation{Session: "sess-1", Message: "bad\nid"}
	write(t, wd, "a.txt", "c\n")
	third, _ := mustTake(t, s, "quiet", 3)
	if want := (Conversation{Session: "sess-1"}); third.Conversation == nil || *third.Conversation != want {
		t.Fatalf("an id with a line break: recorded %+v, want %+v", third.Conversation, want)
	}

	// A snapshot as an older daemon wrote it, with no conversation.
	oldLine := strings.SplitN(read(t, filepath.Join("repo", "testdata"), "subject.golden"), "\n", 2)[0]
	oldLine = strings.Replace(oldLine, "n=7", "n=4", 1)
	oldID, err := s.git.Text(ctx, "commit-tree", treeID(t, s, third.ID), "-m", oldLine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.git.Text(ctx, "update-ref", repo.RefName(4), oldID, ""); err != nil {
		t.Fatal(err)
	}

	list, err := s.List(ctx)
	if err != nil || len(list) != 4 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if list[0].ID != oldID || list[0].Conversation != nil {
		t.Errorf("the old snapshot is listed as %+v", list[0])
	}
	if list[2].ID != second.ID || list[2].Conversation == nil || list[2].Conversation.Message != "msg 1" {
		t.Errorf("List names %+v for the second snapshot", list[2].Conversation)
	}
	s.recent.detail.Store(nil) // Show from git, not from the Take's memory
	d, err := s.Show(ctx, second.ID)
	if err != nil || d.Conversation == nil || *d.Conversation != (Conversation{Session: "sess-1", Message: "msg 1"}) {
		t.Fatalf("Show = %+v, %v", d.Conversation, err)
	}
	if d, err := s.Show(ctx, oldID); err != nil || d.Conversation != nil {
		t.Fatalf("Show of the old snapshot = %+v, %v", d.Conversation, err)
	}
}
