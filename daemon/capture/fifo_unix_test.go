//go:build unix

package capture

import (
	"syscall"
	"testing"
)

// mkfifo makes a FIFO at path: opening it to read would wait for a writer.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
