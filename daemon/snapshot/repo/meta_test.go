package repo

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/subject.golden")

// The metadata line, as written, is the golden file's: one snapshot
// without a conversation (the format of every snapshot taken before it
// was recorded), one with, whose ids need escaping, and one taken with a
// message (note). All read back.
func TestSubjectGolden(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	old := Snapshot{N: 7, Trigger: "quiet", Seq: 42, Time: at, Parent: "0123456789abcdef0123456789abcdef01234567", Added: 3, Modified: 1, Skipped: 1}
	withConv := old
	withConv.Conversation = &Conversation{Session: "9f1c7e2a-3b4d-4c5e-8f60-718293a4b5c6", Message: "item 7=x%y"}
	taken := old
	taken.Trigger, taken.Note = "manual", "before the parser rewrite: 100% sure=no"
	var got strings.Builder
	for _, snap := range []Snapshot{old, withConv, taken} {
		msg := Message(snap, nil, "")
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
	if len(lines) != 3 {
		t.Fatalf("golden holds %d lines, want 3", len(lines))
	}
	for i, wantSnap := range []Snapshot{old, withConv, taken} {
		back, ok := ParseSubject("id", "tree", lines[i])
		if !ok {
			t.Fatalf("line %d does not parse: %s", i, lines[i])
		}
		if back.Note != wantSnap.Note {
			t.Errorf("line %d: note %q, want %q", i, back.Note, wantSnap.Note)
		}
		if back.N != wantSnap.N || back.Seq != wantSnap.Seq || !back.Time.Equal(at) || back.Parent != wantSnap.Parent || back.Added != 3 {
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
	if _, ok := ParseSubject("id", "tree", lines[0]+" session=%zz"); ok {
		t.Error("a session that does not unescape was read")
	}
}
