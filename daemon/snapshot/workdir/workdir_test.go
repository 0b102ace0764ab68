package workdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Problem answers from the last look for problemFresh, and a Check (what
// a Take or a restore does first) is a look: a repointed link shows at
// once after one, and on its own once the last look has aged.
func TestProblemAnswersFromTheLastLook(t *testing.T) {
	dir := t.TempDir()
	a, b, link := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "work")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	w, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	w.clock = func() time.Time { return now }
	if p := w.Problem(); p != "" {
		t.Fatalf("problem before the link moved: %q", p)
	}
	repoint := func(to string) {
		t.Helper()
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	repoint(b)
	if p := w.Problem(); p != "" {
		t.Fatalf("problem within problemFresh of the last look: %q, want the last look's answer", p)
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), b) {
		t.Fatalf("check after the link moved: %v", err)
	}
	if p := w.Problem(); !strings.Contains(p, b) || !strings.Contains(p, a) {
		t.Fatalf("problem right after a check found the link moved: %q", p)
	}
	repoint(a)
	now = now.Add(problemFresh)
	if p := w.Problem(); p != "" {
		t.Fatalf("problem once the last look aged, the link back: %q", p)
	}
	repoint(b)
	now = now.Add(problemFresh)
	if p := w.Problem(); !strings.Contains(p, b) {
		t.Fatalf("problem once the last look aged, the link moved: %q", p)
	}
}
