package capsule

import (
	"strings"
	"testing"
	"time"
)

// TestMarkdownWorkLostFirst: a loss is the first section of the markdown
// resume, kept when the limit leaves the others out, with its paths quoted
// (a control character in a name is shown escaped, never raw) and the
// command that brings them back.
func TestMarkdownWorkLostFirst(t *testing.T) {
	r := &Resume{Agent: "builder", Focus: strings.Repeat("the goal ", 200),
		WorkLost: []WorkLost{{At: time.Now().Add(-time.Minute), Paths: []string{"src/a.go", "evil\x1b[2Jname"}, Snapshot: "0123abcd",
			Restore: "continuityd snapshot restore 0123abcd --agent builder --path src/a.go --path $'evil\\x1b[2Jname'"}}}
	md := r.Markdown(1000)
	first := strings.SplitN(md, "\n## ", 2)[1]
	if !strings.HasPrefix(first, "Work lost\n- 1 min ago: uncommitted changes to src/a.go, ") ||
		!strings.Contains(first, "vanished without a commit; bring them back: `continuityd snapshot restore 0123abcd --agent builder --path src/a.go --path $'evil\\x1b[2Jname'`") {
		t.Fatalf("markdown:\n%s", md)
	}
	if strings.ContainsRune(md, 0x1b) || strings.Contains(md, "## Goal") {
		t.Fatalf("a raw control character, or the goal not left out under the limit:\n%q", md)
	}
}
