package ui

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
)

// BenchmarkDiff10k: the server's part of showing a 10,000-line diff:
// redaction, escaping and the template.
//
//	go test -run '^$' -bench Diff10k ./daemon/ui/
func BenchmarkDiff10k(b *testing.B) {
	var d strings.Builder
	d.WriteString("diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,10000 @@\n")
	for i := range 10000 {
		fmt.Fprintf(&d, "+line %05d of a file the agent wrote whole\n", i)
	}
	ans := &ops.DiffAnswer{Diff: d.String()}
	for b.Loop() {
		t0 := time.Now()
		files, _ := parseDiff(ans, false)
		t1 := time.Now()
		c := changes{Agent: "big", Detail: &ops.Detail{}, Files: files}
		if err := views["changes"].ExecuteTemplate(io.Discard, "layout.html", page{Title: "t", Data: c}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(t1.Sub(t0).Milliseconds()), "parse-ms")
		b.ReportMetric(float64(time.Since(t1).Milliseconds()), "template-ms")
	}
}
