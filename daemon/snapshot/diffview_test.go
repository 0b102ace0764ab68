package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// A diff limited to paths shows those files and directories only, names
// taken literally (a "*" is a name, not a glob); --stat lists each file
// with its counts and the whole name; a path outside the workdir is
// refused, naming it.
func TestDiffView(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "one\n")
	write(t, wd, "src/b.go", "package b\n")
	write(t, wd, "src/deep/c.go", "package c\n")
	write(t, wd, "*.txt", "star\n")
	s := newStore(t, wd, Options{})
	ctx := context.Background()
	mustTake(t, s, "start", 1)
	write(t, wd, "a.txt", "one\ntwo\n")
	write(t, wd, "src/b.go", "package b\n\nfunc B() {}\n")
	write(t, wd, "src/deep/c.go", "package c // changed\n")
	write(t, wd, "*.txt", "star, changed\n")
	long := strings.Repeat("a-rather-long-directory-name/", 4) + "file.go"
	write(t, wd, long, "package x\n")
	second, _ := mustTake(t, s, "quiet", 2)

	files := func(diff string) []string {
		var out []string
		for _, l := range strings.Split(diff, "\n") {
			if name, ok := strings.CutPrefix(l, "+++ b/"); ok {
				out = append(out, name)
			}
		}
		return out
	}
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{nil, "*.txt " + long + " a.txt src/b.go src/deep/c.go"},
		{[]string{"src"}, "src/b.go src/deep/c.go"},
		{[]string{"src/deep/", "a.txt"}, "a.txt src/deep/c.go"},
		{[]string{"*.txt"}, "*.txt"}, // literally, not every .txt
		{[]string{"."}, "*.txt " + long + " a.txt src/b.go src/deep/c.go"},
		{[]string{"nothing/here"}, ""},
	} {
		diff, _, err := s.DiffView(ctx, second.ID, "", 0, View{Paths: c.paths})
		if got := strings.Join(files(diff), " "); err != nil || got != c.want {
			t.Errorf("paths %q: files %q (%v), want %q", c.paths, got, err, c.want)
		}
	}
	stat, _, err := s.DiffView(ctx, second.ID, "", 0, View{Stat: true})
	if err != nil || strings.Contains(stat, "@@") || !strings.Contains(stat, " "+long+" | 1 +") ||
		!strings.Contains(stat, " src/b.go ") || !strings.Contains(stat, "5 files changed") {
		t.Fatalf("stat: %v\n%s", err, stat)
	}
	stat, _, err = s.DiffView(ctx, second.ID, "", 0, View{Stat: true, Paths: []string{"src/deep"}})
	if err != nil || !strings.Contains(stat, "src/deep/c.go | 2 +-") || !strings.Contains(stat, "1 file changed") {
		t.Fatalf("stat of src/deep: %v\n%s", err, stat)
	}
	for _, bad := range []string{"../outside", "/etc/passwd", "", "a\nb"} {
		var ce *capsule.Error
		if _, _, err := s.DiffView(ctx, second.ID, "", 0, View{Paths: []string{bad}}); !errors.As(err, &ce) || ce.Code != capsule.CodeInvalidQuery || ce.Field != "path" {
			t.Errorf("path %q: %v, want INVALID_QUERY (path)", bad, err)
		}
	}
}
