package capsule

import (
	"strings"
	"testing"
	"time"
)

// The markdown says whose changes came in since the last visit, and puts
// conflicts first; a path from the workdir never carries a raw control
// character into the text.
func TestMarkdownByOthersAndConflicts(t *testing.T) {
	r := &Resume{Focus: "ship it",
		SinceLastVisit: SinceLastVisit{Since: time.Now(), ByOthers: []ByOther{{Path: "docs/b.md", By: "agent:reviewer"}, {Path: "notes\x1b[2J.md", By: "outside"}}},
		Conflicts:      []PathConflict{{Path: "src/a.go", Agents: []string{"builder", "reviewer"}, At: time.Now()}}}
	md := r.Markdown(0)
	if !strings.Contains(md, "- changed by others: docs/b.md (agent:reviewer), ") || !strings.Contains(md, "(outside)\n") {
		t.Errorf("no by_others line in the markdown:\n%s", md)
	}
	if strings.Contains(md, "\x1b") {
		t.Errorf("a control character reached the markdown:\n%q", md)
	}
	c, g := strings.Index(md, "## Conflicts\n- src/a.go changed by builder and reviewer"), strings.Index(md, "## Goal")
	if c < 0 || g < 0 || c > g {
		t.Errorf("the conflict is not the first section:\n%s", md)
	}
}
