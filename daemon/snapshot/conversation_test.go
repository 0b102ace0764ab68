package snapshot

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/subject.golden")

// The metadata line, as written, is the golden file's: one snapshot
// without a conversation (the format of every snapshot taken before it
// was recorded) and one with, whose ids need escaping. Both read back.
func TestSubjectGolden(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	old := Snapshot{n: 7, Trigger: "quiet", Seq: 42, Time: at, Parent: "0123456789abcdef0123456789abcdef01234567", Added: 3, Modified: 1, Skipped: 1}
	withConv := old
	withConv.Conversation = &Conversation{Session: "9f1c7e2a-3b4d-4c5e-8f60-718293a4b5c6", Message: "item 7=x%y"}
	s := &Store{}
	var got strings.Builder
	for _, snap := range []Snapshot{old, withConv} {
		msg := s.message(snap, nil, "")
		got.WriteString(msg)
	}
	golden := filepath.Join("testdata", "subject.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("metadata lines:\n%s\nwant (testdata/subject.golden; -update rewrites it):\n%s", got.String(), want)
	}
	lines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("golden holds %d lines, want 2", len(lines))
	}
	for i, wantSnap := range []Snapshot{old, withConv} {
		back, ok := parseSubject("id", "tree", lines[i])
		if !ok {
			t.Fatalf("line %d does not parse: %s", i, lines[i])
		}
		if back.n != wantSnap.n || back.Seq != wantSnap.Seq || !back.Time.Equal(at) || back.Parent != wantSnap.Parent || back.Added != 3 {
			t.Errorf("line %d reads back as %+v", i, back)
		}
		switch {
		case wantSnap.Conversation == nil && back.Conversation != nil:
			t.Errorf("line %d (no conversation) reads back with %+v", i, *back.Conversation)
		case wantSnap.Conversation != nil && (back.Conversation == nil || *back.Conversation != *wantSnap.Conversation):
			t.Errorf("line %d: conversation %+v, want %+v", i, back.Conversation, *wantSnap.Conversation)
		}
	}
	// A value that does not unescape is not a snapshot's line.
	if _, ok := parseSubject("id", "tree", lines[0]+" session=%zz"); ok {
		t.Error("a session that does not unescape was read")
	}
}

// A store told where the conversation stands records it in each snapshot
// it takes (List and Show name it), drops ids that are not ids, and lists
// a snapshot an older daemon took (no conversation) beside them.
func TestConversationRecorded(t *testing.T) {
	ctx := context.Background()
	wd := t.TempDir()
	write(t, wd, "a.txt", "a\n")
	s := newStore(t, wd, Options{})
	first, _ := take(t, s, "start", 1)
	if first.Conversation != nil {
		t.Fatalf("a snapshot with no conversation known records %+v", *first.Conversation)
	}
	point := Conversation{Session: "sess-1", Message: "msg 1"}
	s.SetConversation(func() Conversation { return point })
	write(t, wd, "a.txt", "b\n")
	second, _ := take(t, s, "quiet", 2)
	if second.Conversation == nil || *second.Conversation != point {
		t.Fatalf("Take recorded %+v, want %+v", second.Conversation, point)
	}
	point = Conversation{Session: "sess-1", Message: "bad\nid"}
	write(t, wd, "a.txt", "c\n")
	third, _ := take(t, s, "quiet", 3)
	if want := (Conversation{Session: "sess-1"}); third.Conversation == nil || *third.Conversation != want {
		t.Fatalf("an id with a line break: recorded %+v, want %+v", third.Conversation, want)
	}

	// A snapshot as an older daemon wrote it, with no conversation.
	oldLine := strings.SplitN(read(t, "testdata", "subject.golden"), "\n", 2)[0]
	oldLine = strings.Replace(oldLine, "n=7", "n=4", 1)
	oldID, err := s.git.Text(ctx, "commit-tree", third.tree, "-m", oldLine)
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
	s.newestDetail.Store(nil) // Show from git, not from the Take's memory
	d, err := s.Show(ctx, second.ID)
	if err != nil || d.Conversation == nil || *d.Conversation != (Conversation{Session: "sess-1", Message: "msg 1"}) {
		t.Fatalf("Show = %+v, %v", d.Conversation, err)
	}
	if d, err := s.Show(ctx, oldID); err != nil || d.Conversation != nil {
		t.Fatalf("Show of the old snapshot = %+v, %v", d.Conversation, err)
	}
}
