//go:build unix

package watch

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestUntrustedIgnoreFiles: a .gitignore that is a link to /dev/zero or a
// FIFO (a cloned or unpacked tree may carry either) is passed over at
// once; a regular one still counts.
func TestUntrustedIgnoreFiles(t *testing.T) {
	zero, fifo, ok := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(zero, ".gitignore")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, ".gitignore"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ok, ".gitignore"), []byte("*.log\n"), 0o600)
	for _, dir := range []string{fifo, zero} { // the FIFO first: a read of /dev/zero never ends
		done := make(chan *ruleSet, 1)
		go func() { done <- loadRules(nil, dir, false) }()
		select {
		case rs := <-done:
			if rs != nil {
				t.Errorf("%s: rules from an untrusted .gitignore", dir)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: reading .gitignore blocked", dir)
		}
	}
	if loadRules(nil, ok, false) == nil {
		t.Error("a regular .gitignore was not read")
	}
}
