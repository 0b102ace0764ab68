package watch

import (
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// summaryWith returns the first summary whose Paths name p (waitPaths
// has seen it).
func (h *harness) summaryWith(p string) Summary {
	h.t.Helper()
	h.waitPaths(60*time.Second, p)
	for _, s := range h.summaries() {
		if slices.Contains(s.Paths, p) {
			return s
		}
	}
	h.t.Fatalf("no summary names %s", p)
	return Summary{}
}

// TestSummaryChangedIsComplete: a summary's Changed holds what a snapshot
// must look at again, also what is not activity (ignored files, editor
// temporary files, a mode change, a nested repository appearing, a file
// where a directory was moved away), and Complete is withdrawn after
// lost events, even when the rescan finds nothing, and for good once a
// directory cannot be watched.
func TestSummaryChangedIsComplete(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(root, "run.sh"), "echo\n")
	mustWrite(t, filepath.Join(root, "d/f"), "x")
	mustWrite(t, filepath.Join(root, "sub/f"), "x")
	var failDir atomic.Bool
	h := start(t, root, Options{}, func(w *Watcher) {
		w.addHook = func(p string) error {
			if failDir.Load() && filepath.Base(p) == "unwatched" {
				return syscall.EACCES
			}
			return nil
		}
	})

	h.write("a.txt", "activity")
	h.write("x.log", "ignored")
	h.write("b.txt~", "editor backup")
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sub/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	h.write("marker1", "last")
	s := h.summaryWith("marker1")
	if !s.Complete {
		t.Fatalf("summary not complete: %+v", s)
	}
	for _, p := range []string{"a.txt", "x.log", "b.txt~", "run.sh", "sub/", "d/", "marker1"} {
		if !slices.Contains(s.Changed, p) {
			t.Errorf("Changed lacks %s: %q", p, s.Changed)
		}
	}
	if slices.Contains(s.Paths, "x.log") || slices.Contains(s.Paths, "b.txt~") || slices.Contains(s.Paths, "run.sh") {
		t.Errorf("activity names what is not work: %q", s.Paths)
	}

	// A directory moved away, then a file of its name gone: still seen.
	h.write("e/f", "x")
	h.write("marker2", "x")
	h.summaryWith("marker2")
	if err := os.RemoveAll(filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	h.write("e", "now a file")
	h.write("marker3", "x")
	h.summaryWith("marker3")
	if err := os.Remove(filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	h.write("marker4", "x")
	if s := h.summaryWith("marker4"); !s.Complete || !slices.Contains(s.Changed, "e") {
		t.Errorf("the file that replaced a directory went unseen: %+v", s)
	}

	// Lost events, and a rescan that finds nothing new: the next summary
	// cannot vouch; the one after it can.
	h.w.injectErr <- fsnotify.ErrEventOverflow
	h.write("marker5", "x")
	if s := h.summaryWith("marker5"); s.Complete {
		t.Errorf("summary after an overflow is complete: %+v", s)
	}
	h.write("marker6", "x")
	if s := h.summaryWith("marker6"); !s.Complete {
		t.Errorf("summary after the incomplete one is not complete: %+v", s)
	}

	// A directory that cannot be watched: never complete again.
	failDir.Store(true)
	if err := os.Mkdir(filepath.Join(root, "unwatched"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the failed watch", func() bool { return h.w.Stats().WatchErrors > 0 })
	h.write("marker7", "x")
	if s := h.summaryWith("marker7"); s.Complete {
		t.Errorf("summary complete with a directory unwatched: %+v", s)
	}
}
