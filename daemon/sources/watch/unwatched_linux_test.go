package watch

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// deepTree makes, below root, directories nested so deep that their
// paths pass the kernel's limit (PATH_MAX, 4096 bytes): made one below
// the other through directory handles, as no path can name them.
func deepTree(t *testing.T, root string) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg := strings.Repeat("d", 200)
	for range 25 {
		if err := unix.Mkdirat(fd, seg, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, seg, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
}

// TestUnwatchedDirectoryDegrades: a directory too deep to watch is not
// only a WARN line: the Watcher is degraded, saying so and why (its path
// cut short), and it goes on watching the rest.
func TestUnwatchedDirectoryDegrades(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, root+"/ok/f.txt", "x")
	deepTree(t, root)
	h := start(t, root, Options{}, nil)
	d := h.w.Degraded()
	if !strings.Contains(d, "a directory cannot be watched; changes below are not seen") ||
		!strings.Contains(d, "file name too long") || !strings.Contains(d, "characters)") || len(d) > 400 {
		t.Errorf("Degraded() = %q, want the unwatched directory, cut short, and why", d)
	}
	if !strings.Contains(h.logs.String(), "cannot watch directory") {
		t.Errorf("no WARN line:\n%s", h.logs)
	}
	h.write("ok/g.txt", "still watching")
	h.waitPaths(time.Minute, "ok/g.txt")
}
