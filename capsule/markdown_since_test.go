package capsule

import (
	"strings"
	"testing"
	"time"
)

// TestMarkdownPathCounts: a path changed more than once shows its count.
func TestMarkdownPathCounts(t *testing.T) {
	r := &Resume{SinceLastVisit: SinceLastVisit{Since: time.Now(), Paths: []string{"go.mod", "main.go"}, PathCount: 4,
		PathCounts: map[string]int{"go.mod": 1, "main.go": 3}}}
	md := r.Markdown(0)
	if !strings.Contains(md, "- 4 paths changed: go.mod, main.go (×3)\n") {
		t.Fatalf("markdown:\n%s", md)
	}
}

// TestMarkdownSingulars: one of a thing is said in the singular.
func TestMarkdownSingulars(t *testing.T) {
	r := &Resume{SinceLastVisit: SinceLastVisit{Since: time.Now(), Writes: 1, Paths: []string{"go.mod"}, PathCount: 1},
		Context: ContextState{Compactions: 1}}
	md := r.Markdown(0)
	for _, want := range []string{"- 1 write\n", "- 1 path changed: go.mod\n", "- 1 compaction\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in the markdown:\n%s", want, md)
		}
	}
}
