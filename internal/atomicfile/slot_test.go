//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

// A Slot replaces the whole file with its mode, durable or not, and keeps
// one spare beside it; on Linux its writes after the first two create no
// inode (the names are swapped), and the file is always whole.
func TestSlotReplacesWithoutNewInodes(t *testing.T) {
	for _, durable := range []bool{true, false} {
		dir := t.TempDir()
		p := filepath.Join(dir, "state.json")
		s := NewSlot(p, 0o640, durable)
		inodes := func() []uint64 {
			t.Helper()
			var out []uint64
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fi.Sys().(*syscall.Stat_t).Ino)
			}
			slices.Sort(out)
			return out
		}
		var after2 []uint64
		for i, content := range []string{"one", "two, longer", "3", "four"} {
			if err := s.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil || string(b) != content {
				t.Fatalf("durable %v, write %d: content %q, %v; want %q", durable, i+1, b, err, content)
			}
			fi, _ := os.Stat(p)
			if fi.Mode().Perm() != 0o640 {
				t.Fatalf("durable %v, write %d: mode %v", durable, i+1, fi.Mode().Perm())
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() != "state.json" && e.Name() != ".state.json.spare" {
					t.Fatalf("durable %v, write %d: %s beside the file and its spare", durable, i+1, e.Name())
				}
			}
			switch {
			case i == 1:
				after2 = inodes()
			case i > 1 && runtime.GOOS == "linux":
				if got := inodes(); !slices.Equal(got, after2) {
					t.Fatalf("durable %v, write %d: inodes %v, want %v: a write made a new file", durable, i+1, got, after2)
				}
			}
		}
	}
}

// A Slot whose directory is gone says so; the next write, once it is
// back, works.
func TestSlotMissingDirectoryFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	s := NewSlot(filepath.Join(dir, "f"), 0o600, true)
	if err := s.Write([]byte("x")); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
}
