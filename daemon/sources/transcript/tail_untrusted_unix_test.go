//go:build unix

package transcript

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/safefile"
)

// TestTailRefusesWhatIsNoTranscript: a transcript path is named by a hook
// payload, so it may be a FIFO (never waited on) or a link to a device
// (not followed); both come back as refusals, at once.
func TestTailRefusesWhatIsNoTranscript(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.jsonl")
	os.Symlink("/dev/zero", zero)
	for path, want := range map[string]error{fifo: safefile.ErrNotRegular, zero: safefile.ErrSymlink} {
		done := make(chan error, 1)
		go func() {
			_, _, err := (&Tail{Path: path}).ReadNew(0)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Errorf("%s: got %v, want %v", path, err, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the read blocked", path)
		}
	}
}
