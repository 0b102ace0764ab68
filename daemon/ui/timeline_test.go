package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// A long diff: the view carries its first firstLines lines over all its
// files, and each file cut short says how many lines it holds back and
// where they come from; the rest handler's blocks then hold exactly the
// lines held back.
func TestHoldBackKeepsTheFirstLines(t *testing.T) {
	var d strings.Builder
	for _, f := range []struct {
		name  string
		lines int
	}{{"small.txt", 10}, {"big.txt", 10000}, {"after.txt", 5}} {
		fmt.Fprintf(&d, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", f.name, f.name, f.name, f.lines)
		for i := range f.lines {
			fmt.Fprintf(&d, "+%s line %05d\n", f.name, i)
		}
	}
	files, _ := parseDiff(&ops.DiffAnswer{Diff: d.String()}, false)
	whole := append([]fileDiff(nil), files...)
	holdBack(files, func(i int, f fileDiff) string { return fmt.Sprintf("rest-%d-%d", i, len(f.Lines)) })
	shown := 0
	for _, f := range files {
		shown += len(f.Lines)
	}
	if shown != firstLines {
		t.Errorf("the view carries %d lines, want %d", shown, firstLines)
	}
	if files[0].Rest != 0 || files[0].Src != "" || len(files[0].Lines) != 11 {
		t.Errorf("the small file: %d lines, %d held back (%q)", len(files[0].Lines), files[0].Rest, files[0].Src)
	}
	if got, want := files[1].Rest, 10001-(firstLines-11); got != want || files[1].Src != fmt.Sprintf("rest-1-%d", firstLines-11) {
		t.Errorf("the big file holds back %d lines from %q, want %d", got, files[1].Src, want)
	}
	if files[2].Rest != 6 || len(files[2].Lines) != 0 {
		t.Errorf("the file after: %d lines shown, %d held back", len(files[2].Lines), files[2].Rest)
	}
	if files[1].Added != 10000 || files[1].Status != ops.StatusAdded {
		t.Errorf("the big file counts +%d, %s", files[1].Added, files[1].Status)
	}
	rest := string(linesHTML(whole[1].Lines[len(files[1].Lines):], false))
	if n := strings.Count(rest, "<span"); n != files[1].Rest || !strings.HasSuffix(rest, "big.txt line 09999</span>") {
		t.Errorf("the rest holds %d lines, want %d, ending %q", n, files[1].Rest, rest[max(0, len(rest)-60):])
	}
}

// The timeline lays events between the page's snapshots, newest first;
// a session filter keeps that session's events and those that name none;
// turn_end links to its turn's changes; the events a timeline leaves to
// other views are left out.
func TestTimelineRows(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	conv := &ops.Conversation{Session: "s1"}
	list := []ops.Snapshot{ // newest first
		{ID: "e1", Time: at(30), Trigger: "turn_end", Conversation: conv},
		{ID: "q1", Time: at(20), Trigger: "quiet", Conversation: conv},
		{ID: "t1", Time: at(10), Trigger: "turn_start", Conversation: conv},
		{ID: "st", Time: at(0), Trigger: "start"},
	}
	sig := func(m int, kv ...string) ops.Event {
		d := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			d[kv[i]] = kv[i+1]
		}
		return ops.Event{At: at(m), Kind: "signal", Data: d}
	}
	evs := []ops.Event{
		sig(5, "kind", "session", "event", "start", "source", "startup", "session_id", "s1"),
		sig(6, "kind", "session", "event", "start", "source", "startup", "session_id", "s2"),
		sig(9, "kind", "activity", "event", "prompt", "session_id", "s1"),
		sig(12, "kind", "activity", "event", "tool", "session_id", "s1"),
		sig(13, "kind", "context", "used_fraction", "x", "session_id", "s1"),
		sig(15, "kind", "compaction", "phase", "pre", "trigger", "auto", "session_id", "s1"),
		{At: at(16), Kind: "checkpoint", Summary: "focus saved"},
		{At: at(17), Kind: "activity", Summary: "a file changed"},
		sig(29, "kind", "session", "event", "stop", "session_id", "s1"),
		{At: at(40), Kind: "work_lost", Summary: "uncommitted work vanished"},
	}
	decisions := []capsule.DecisionRecord{{At: at(18), Decision: capsule.Decision{Chosen: "a flat tax", Because: "the brackets are not decided"}}}
	kinds := func(rows []tlRow) string {
		var b []string
		for _, r := range rows {
			k := r.Kind
			if r.Snap != nil {
				k = r.Snap.ID
			}
			if r.Turn != "" {
				k += "+turn"
			}
			b = append(b, k)
		}
		return strings.Join(b, " ")
	}
	turns := turnStarts(list)
	rows := timelineRows("a", list, turns, true, true, "", evs, decisions)
	if got, want := kinds(rows), "lost e1+turn turn q1 decision checkpoint compaction t1 turn session session st"; got != want {
		t.Errorf("the timeline:\n got %s\nwant %s", got, want)
	}
	if rows[1].Turn != "/ui/a/a/s/e1?against=t1" {
		t.Errorf("turn_end's changes: %q", rows[1].Turn)
	}
	one := timelineRows("a", list, turns, true, true, "s1", evs, decisions)
	if got, want := kinds(one), "lost e1+turn turn q1 decision checkpoint compaction t1 turn session st"; got != want {
		t.Errorf("the timeline of session s1:\n got %s\nwant %s", got, want)
	}
	// A middle page shows only the events of its own time.
	mid := timelineRows("a", list[1:3], turns, false, false, "", evs, decisions)
	if got, want := kinds(mid), "q1 decision checkpoint compaction t1"; got != want {
		t.Errorf("a middle page:\n got %s\nwant %s", got, want)
	}
	if got := sinceLastMessage("a", list); got != "/ui/a/a/s/e1?against=t1" {
		t.Errorf("since the last message: %q", got)
	}
}
