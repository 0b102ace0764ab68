//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test if it does not return promptly: a FIFO
// opened the ordinary way blocks forever, and the test must say so
// instead of hanging.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", zero)
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 3<<30); err != nil { // sparse: no disk
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink("ok", link)
	os.WriteFile(filepath.Join(dir, "ok"), []byte("fine\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)

	for _, c := range []struct {
		path   string
		follow bool
		want   error
		says   string
	}{
		{fifo, false, ErrNotRegular, "FIFO"},
		{fifo, true, ErrNotRegular, "FIFO"},
		{zero, false, ErrSymlink, "symbolic link"},
		{zero, true, ErrNotRegular, "character device"},
		{"/dev/zero", false, ErrNotRegular, "character device"},
		{"/dev/null", true, ErrNotRegular, "character device"},
		{big, false, ErrTooLarge, "3.0 GiB"},
		{filepath.Join(dir, "sub"), false, ErrNotRegular, "directory"},
		{link, false, ErrSymlink, "symbolic link"},
	} {
		var err error
		within(t, c.path, func() {
			if c.follow {
				_, err = ReadFileFollow(c.path, 64<<10)
			} else {
				_, err = ReadFile(c.path, 64<<10)
			}
		})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s (follow %v): got %v, want %v naming the file and %q", c.path, c.follow, err, c.want, c.says)
		}
	}
	if b, err := ReadFileFollow(link, 64<<10); err != nil || string(b) != "fine\n" {
		t.Errorf("a followed link: %q %v", b, err)
	}
	if b, err := ReadFile(filepath.Join(dir, "ok"), 5); err != nil || string(b) != "fine\n" {
		t.Errorf("at the limit: %q %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "ok"), 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit by one: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 4); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestOpenInStaysInside(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600)
	wd := t.TempDir()
	os.WriteFile(filepath.Join(wd, "notes.md"), []byte("inside"), 0o600)
	os.Symlink("notes.md", filepath.Join(wd, "inner"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(wd, "abs"))
	os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(wd, "rel"))
	os.Symlink(outside, filepath.Join(wd, "dirlink"))
	os.Symlink("/dev/zero", filepath.Join(wd, "zero"))
	syscall.Mkfifo(filepath.Join(wd, "fifo"), 0o600)
	root, err := os.OpenRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, _, err := ReadFileIn(root, "inner", 1<<10); err != nil || string(b) != "inside" {
		t.Errorf("a link inside: %q %v", b, err)
	}
	for name, want := range map[string]error{
		"abs": ErrOutside, "rel": ErrOutside, "dirlink/secret": ErrOutside, "zero": ErrOutside, "fifo": ErrNotRegular,
	} {
		var err error
		within(t, name, func() { _, _, err = ReadFileIn(root, name, 1<<10) })
		if !errors.Is(err, want) || !strings.Contains(err.Error(), filepath.Join(wd, name)) {
			t.Errorf("%s: got %v, want %v naming the file", name, err, want)
		}
	}
	if _, _, err := ReadFileIn(root, "missing", 1<<10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestCheckPrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("t"), 0o600)
	fi, _ := os.Stat(p)
	if err := CheckPrivate(fi, p); err != nil {
		t.Errorf("0600: %v", err)
	}
	os.Chmod(p, 0o644)
	fi, _ = os.Stat(p)
	if err := CheckPrivate(fi, p); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 600 "+p) {
		t.Errorf("0644: %v", err)
	}
	if os.Geteuid() == 0 {
		os.Chmod(p, 0o600)
		os.Chown(p, 12345, 12345)
		fi, _ = os.Stat(p)
		if err := CheckPrivate(fi, p); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "uid 12345") {
			t.Errorf("another owner: %v", err)
		}
	}
}

// ReadAllInto reads into the caller's buffer while the file fits, and
// refuses a file that grew past the limit after its stat, as ReadAll.
func TestReadAllInto(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("fine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, fi, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 3, 64)
	b, err := ReadAllInto(buf, f, fi, p, 5)
	if err != nil || string(b) != "fine\n" || &b[0] != &buf[:1][0] {
		t.Fatalf("into a buffer with room: %q %v (same array: %v)", b, err, err == nil && &b[0] == &buf[:1][0])
	}
	// Grown since the stat: fi still says 5 bytes.
	if err := os.WriteFile(p, []byte("grown!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAllInto(buf, f, fi, p, 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a file grown past the limit: %v", err)
	}
}
