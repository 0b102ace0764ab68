//go:build unix

package apitoken

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/internal/safefile"
)

func TestAPITokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	tok, err := LoadOrCreate(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("new token: %q %v", tok, err)
	}
	if fi, _ := os.Lstat(path); fi.Mode() != 0o600 {
		t.Fatalf("new token file mode %v", fi.Mode())
	}
	if again, err := LoadOrCreate(dir); err != nil || again != tok {
		t.Fatalf("the same token again: %q %v", again, err)
	}

	refused := func(what string, want error, says ...string) {
		t.Helper()
		_, err := LoadOrCreate(dir)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want %v naming %s", what, err, want, path)
			return
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", what, err, s)
			}
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error shows the token", what)
		}
	}
	os.Chmod(path, 0o644)
	refused("mode 0644", safefile.ErrNotPrivate, "0644", "chmod 600")
	os.Chmod(path, 0o600)
	if os.Geteuid() == 0 {
		os.Chown(path, 4242, 4242)
		refused("another owner", safefile.ErrNotPrivate, "uid 4242")
		os.Chown(path, 0, 0)
	}

	os.Remove(path)
	os.Symlink("/etc/hostname", path)
	refused("a link", safefile.ErrSymlink, "remove")
	os.Remove(path)
	syscall.Mkfifo(path, 0o600)
	refused("a FIFO", safefile.ErrNotRegular, "remove")
	os.Remove(path)

	// A dangling link planted at the name is not written through.
	target := filepath.Join(dir, "planted")
	os.Symlink(target, path)
	if _, err := LoadOrCreate(dir); err == nil {
		t.Error("a dangling link accepted")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token was written through a link: %v", err)
	}
}
