package capsule

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMarkdownPathCounts: a path changed more than once shows its count,
// and the line's count says what it counts: changes to paths, or paths.
func TestMarkdownPathCounts(t *testing.T) {
	many := make([]string, 12)
	counts := map[string]int{}
	for i := range many {
		many[i] = fmt.Sprintf("f%d.go", i)
		counts[many[i]] = 1
	}
	for _, c := range []struct {
		s    SinceLastVisit
		want string
	}{
		{SinceLastVisit{Paths: []string{"billing/billing.go", "main.go", "billing/tax.go"}, PathCount: 9,
			PathCounts: map[string]int{"billing/billing.go": 3, "main.go": 5, "billing/tax.go": 1}},
			"- 9 changes to 3 paths: billing/billing.go (×3), main.go (×5), billing/tax.go\n"},
		{SinceLastVisit{Paths: []string{"go.mod", "main.go"}, PathCount: 2, PathCounts: map[string]int{"go.mod": 1, "main.go": 1}},
			"- 2 paths changed: go.mod, main.go\n"},
		// Older paths have left the list: their changes are counted still.
		{SinceLastVisit{Paths: []string{"a.go"}, PathCount: 7, PathCounts: map[string]int{"a.go": 2}},
			"- 7 changes to at least 2 paths: a.go (×2)\n"},
		{SinceLastVisit{Paths: many, PathCount: 12, PathCounts: counts},
			"- 12 paths changed: f2.go, f3.go, f4.go, f5.go, f6.go, f7.go, f8.go, f9.go, f10.go, f11.go, and 2 more\n"},
	} {
		c.s.Since = time.Now()
		md := (&Resume{SinceLastVisit: c.s}).Markdown(0)
		if !strings.Contains(md, c.want) {
			t.Errorf("want %q in the markdown:\n%s", c.want, md)
		}
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
