package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile replaces the whole file, with its mode, and leaves no
// temporary file behind.
func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"WriteFile": WriteFile, "ReplaceFile": ReplaceFile} {
		dir := t.TempDir()
		p := filepath.Join(dir, "state.json")
		if err := write(p, []byte("one"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := write(p, []byte("two"), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "two" {
			t.Fatalf("%s: content = %q, %v", name, b, err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s: mode = %v", name, fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("%s: leftover files: %v", name, entries)
		}
	}
}

func TestWriteFileMissingDirFails(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("expected an error for a missing directory")
	}
}
