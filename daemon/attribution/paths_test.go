package attribution

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/toolpaths"
)

func TestResolverRel(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(filepath.Join(work, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(work, link); err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(link) // the workdir named through a link
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cwd, p, want string }{
		{"", filepath.Join(link, "src/a.go"), "src/a.go"},
		{"", filepath.Join(work, "src/a.go"), "src/a.go"}, // the real path of the same file
		{filepath.Join(link, "src"), "a.go", "src/a.go"},
		{link, "./src/../b.go", "b.go"},
	} {
		got, err := r.Rel(c.cwd, c.p)
		if err != nil || got != c.want {
			t.Errorf("Rel(%q, %q) = %q, %v; want %q", c.cwd, c.p, got, err, c.want)
		}
	}
	for _, c := range []struct{ cwd, p, why string }{
		{"", "/etc/passwd", "outside the workdir"},
		{link, "../x", "outside the workdir"},
		{"", link, "the workdir itself"},
		{"", filepath.Join(link, ".git/config"), ".git"},
		{"", "rel.go", "no absolute working directory"},
		{"", filepath.Join(link, "a\x00b"), "control character"},
		{"", "", "empty"},
		{"", "/" + strings.Repeat("a", toolpaths.MaxPath), "bytes"},
		{"", "/\xff", "not UTF-8"},
	} {
		_, err := r.Rel(c.cwd, c.p)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Rel(%q, %q) = %v, want an error saying %q", c.cwd, c.p, err, c.why)
		}
	}
	if _, err := NewResolver("relative/dir"); err == nil {
		t.Error("a relative workdir was accepted")
	}
}
