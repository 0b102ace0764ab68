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
