package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tree makes top/work/a/b (with a file), top/outside (with a file) and
// top/work/link -> top/outside, top/work/a/inner -> ../a (a link that
// stays inside).
func tree(t *testing.T) (work, outside string) {
	t.Helper()
	top := t.TempDir()
	work, outside = filepath.Join(top, "work"), filepath.Join(top, "outside")
	for _, d := range []string{filepath.Join(work, "a", "b"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(work, "a", "b", "f"), filepath.Join(outside, "f")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a", filepath.Join(work, "a", "inner")); err != nil {
		t.Fatal(err)
	}
	return work, outside
}

// both runs f with openat2 and with the walk name by name.
func both(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}

// OpenDir follows no link, out of the tree or inside it, at any depth,
// and names the link it met.
func TestOpenDirFollowsNoLink(t *testing.T) {
	both(t, func(t *testing.T) {
		work, _ := tree(t)
		top, err := Open(work)
		if err != nil {
			t.Fatal(err)
		}
		defer top.Close()
		for rel, link := range map[string]string{"link": "link", "a/inner": "a/inner", "a/inner/b": "a/inner"} {
			_, err := top.OpenDir(rel)
			var se *SymlinkError
			if !errors.As(err, &se) || se.Path != link || !errors.Is(err, ErrSymlink) {
				t.Errorf("OpenDir(%q) = %v, want the link %s named", rel, err, link)
			}
		}
		b, err := top.OpenDir("a/b")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if fi, err := b.Lstat("f"); err != nil || !fi.Mode().IsRegular() || b.Name() != work+"/a/b" {
			t.Fatalf("a/b/f: %v %v, name %s", fi, err, b.Name())
		}
		for _, rel := range []string{"../work", "a/../a", "/tmp", "", "a//b", "a/b/f"} {
			if d, err := top.OpenDir(rel); err == nil {
				d.Close()
				t.Errorf("OpenDir(%q) opened", rel)
			}
		}
	})
}

// A directory handle stays the directory it opened: swapped with a link
// to a directory outside (renameat2 RENAME_EXCHANGE), what is made, removed
// or given away through it stays in the directory, wherever it moved.
func TestHandleOutlivesASwap(t *testing.T) {
	work, outside := tree(t)
	top, err := Open(work)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	b, err := top.OpenDir("a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// a/b becomes the link to outside; the directory is now at "link".
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(work, "a", "b"), unix.AT_FDCWD, filepath.Join(work, "link"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove("f"); err != nil {
		t.Fatal(err)
	}
	f, err := b.Create("new", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(outside, "f")); err != nil {
		t.Fatalf("the file outside was removed through a handle: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was made outside through a handle")
	}
	if _, err := os.Stat(filepath.Join(work, "link", "new")); err != nil {
		t.Fatalf("the file made is not in the directory the handle opened: %v", err)
	}
	// Opened again, a/b is the link now: refused.
	if _, err := top.OpenDir("a/b"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("OpenDir of the link = %v", err)
	}
}

// Remove, RemoveDir and Lchown act on a link itself, never on what it
// points to.
func TestNameCallsActOnTheLink(t *testing.T) {
	work, outside := tree(t)
	top, err := Open(work)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.RemoveDir("link"); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("RemoveDir of a link = %v", err)
	}
	if os.Geteuid() == 0 {
		if err := top.Lchown("link", 40001, 40001); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(outside)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Fatalf("Lchown of a link gave its target to %d", st.Uid)
		}
	}
	if target, err := top.Readlink("link"); err != nil || target != outside {
		t.Fatalf("Readlink = %q %v", target, err)
	}
	if err := top.Remove("link"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err != nil {
		t.Fatalf("Remove of a link touched its target: %v", err)
	}
	if err := top.Remove("a"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("Remove of a directory = %v", err)
	}
	for _, name := range []string{"a/b", "..", ".", ""} {
		if err := top.Remove(name); err == nil || errors.Is(err, syscall.ENOENT) {
			t.Errorf("Remove(%q) = %v, want a refusal of the name", name, err)
		}
	}
}
