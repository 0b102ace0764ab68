//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noWait runs f, failing the test if it blocks: a FIFO opened the ordinary
// way waits for a writer forever.
func noWait(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s blocked", what)
		return nil
	}
}

// TestUntrustedConfigAndTokenFiles: the configuration file and a
// token_file must be regular files within their limits; a FIFO is refused
// at once and a device or an oversized file is not read.
func TestUntrustedConfigAndTokenFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	os.WriteFile(big, nil, 0o600)
	if err := os.Truncate(big, 3<<30); err != nil { // sparse
		t.Fatal(err)
	}
	for _, c := range []struct{ path, says string }{
		{fifo, "FIFO"}, {"/dev/zero", "character device"}, {big, "over the limit"},
	} {
		err := noWait(t, "config "+c.path, func() error { _, err := Load(c.path); return err })
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("config %s: %v", c.path, err)
		}
		err = noWait(t, "token_file "+c.path, func() error {
			_, err := Upstream{Kind: KindDelx, TokenFile: c.path}.Token()
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("token_file %s: %v", c.path, err)
		}
	}
	// A link to a private regular file is followed: secret mounts use them.
	os.WriteFile(filepath.Join(dir, "tok"), []byte("tok-1\n"), 0o600)
	os.Symlink("tok", filepath.Join(dir, "link"))
	if tok, err := (Upstream{Kind: KindDelx, TokenFile: filepath.Join(dir, "link")}).Token(); err != nil || tok != "tok-1" {
		t.Errorf("linked token_file: %q %v", tok, err)
	}
}
