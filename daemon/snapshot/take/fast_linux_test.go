//go:build linux

package take

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A named pipe where the walk saw a file never holds a Take from what
// changed: it is not read (safefile), and is the next Take's.
func TestStoreFileNeverWaitsOnAPipe(t *testing.T) {
	tk := newTaker(t)
	wd := tk.work
	s := &tk.fast
	fifo := filepath.Join(wd, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.storeFile(seenFile{path: "pipe", mode: 0o644})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a named pipe read as a file: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reading a named pipe where a file was held the Take")
	}
}
