package capsule

import (
	"strings"
	"testing"
	"time"
)

// An interrupted restore is the markdown resume's first section: what it
// restored, how far it got, whether it was finished, the safety snapshot
// and the command that undoes it, with no raw control character.
func TestMarkdownRestoreInterruptedFirst(t *testing.T) {
	now := time.Now()
	r := &Resume{Agent: "builder", Focus: "the goal",
		WorkLost: []WorkLost{{At: now, Paths: []string{"a.go"}, Snapshot: "0123abcd", Restore: "continuityd snapshot restore 0123abcd --path a.go"}},
		RestoreInterrupted: &RestoreInterrupted{Snapshot: "aaaaaaaaaaaaaaaaaaaaaaaa", Safety: "bbbbbbbbbbbbbbbbbbbb", Found: now.Add(-2 * time.Minute),
			Files: 20, Done: 16, Finished: true, FinishSafety: "cccccccccccccccc",
			Undo: "continuityd snapshot restore bbbbbbbbbbbbbbbbbbbb --agent builder --path $'evil\\x1b[2Jname'"}}
	md := r.Markdown(0)
	first := strings.SplitN(md, "\n## ", 2)[1]
	want := "Restore interrupted\na restore of snapshot aaaaaaaaaaaa (20 files) was interrupted (a kill, a crash or a full disk) with at least 16 done, 2 min ago; " +
		"the daemon finished it when it started again (the tree as it found it then is snapshot cccccccccccc). The tree before it is snapshot bbbbbbbbbbbb; " +
		"undo it with `continuityd snapshot restore bbbbbbbbbbbbbbbbbbbb --agent builder --path $'evil\\x1b[2Jname'`\n"
	if !strings.HasPrefix(first, want) || !strings.Contains(md, "## Work lost") {
		t.Fatalf("markdown:\n%s\nwant first:\n%s", md, want)
	}
	r.RestoreInterrupted.Finished, r.RestoreInterrupted.Problem = false, "the workdir\x07 moved"
	if md := r.Markdown(0); !strings.Contains(md, "; it is not finished: the workdir") || strings.ContainsRune(md, 0x07) {
		t.Fatalf("not finished:\n%q", md)
	}
}
