package gittool_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/gittool"
)

// TestFindAsksEachBinaryOnce: many agents opening at once find git once
// each; its version is asked of the binary once, and asked again when the
// binary is replaced (an upgrade).
func TestFindAsksEachBinaryOnce(t *testing.T) {
	dir := t.TempDir()
	bin, calls := filepath.Join(dir, "git"), filepath.Join(dir, "calls")
	script := func(version string) string {
		return "#!/bin/sh\necho x >> " + calls + "\necho 'git version " + version + "'\n"
	}
	write := func(version string) {
		t.Helper()
		tmp := bin + ".new" // replaced as a package manager does: a new file renamed over
		if err := os.WriteFile(tmp, []byte(script(version)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, bin); err != nil {
			t.Fatal(err)
		}
	}
	ran := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	write("2.39.5")
	for range 5 {
		tool, err := gittool.Find(context.Background(), bin)
		if err != nil {
			t.Fatal(err)
		}
		if got := tool.Version.String(); got != "2.39.5" {
			t.Fatalf("version %q, want 2.39.5", got)
		}
	}
	if n := ran(); n != 1 {
		t.Fatalf("git --version ran %d times for five finds of one binary, want once", n)
	}
	write("2.47.1")
	tool, err := gittool.Find(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := tool.Version.String(); got != "2.47.1" || ran() != 2 {
		t.Fatalf("after the binary was replaced: version %q after %d runs, want 2.47.1 asked again", got, ran())
	}
}
