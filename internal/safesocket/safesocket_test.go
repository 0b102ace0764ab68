package safesocket

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenModeAndSecondListenerRefused(t *testing.T) {
	p := filepath.Join(shortDir(t), "run", "d.sock")
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(p))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", di.Mode().Perm())
	}
	if _, err := Listen(p, 0o600); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen: %v, want ErrInUse", err)
	}
}

// A group socket in a directory only its owner may search would be
// unreachable for the group: a directory Listen creates lets in whom the
// socket lets in, whatever the umask, and one that exists is left alone.
func TestSocketDirectoryFollowsTheSocketMode(t *testing.T) {
	old := syscallUmask(0o077) // as under the systemd unit (UMask=0077)
	defer syscallUmask(old)
	for _, c := range []struct {
		sock, dir os.FileMode
	}{{0o600, 0o700}, {0o660, 0o750}, {0o620, 0o750}, {0o666, 0o755}} {
		p := filepath.Join(shortDir(t), "run", "d.sock")
		ln, err := Listen(p, c.sock)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if di, _ := os.Stat(filepath.Dir(p)); di.Mode().Perm() != c.dir {
			t.Errorf("socket %v: directory %v, want %v", c.sock, di.Mode().Perm(), c.dir)
		}
	}
	existing := shortDir(t)
	if err := os.Chmod(existing, 0o711); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(existing, "d.sock"), 0o660)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if di, _ := os.Stat(existing); di.Mode().Perm() != 0o711 {
		t.Errorf("an existing directory was changed to %v", di.Mode().Perm())
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	p := filepath.Join(shortDir(t), "d.sock")
	// A socket file nobody listens on: what a SIGKILLed daemon leaves.
	raw, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	raw.(*net.UnixListener).SetUnlinkOnClose(false)
	raw.Close()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("stale socket should exist: %v", err)
	}
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("socket not removed on close: %v", err)
	}
}

func TestLiveForeignListenerDetected(t *testing.T) {
	p := filepath.Join(shortDir(t), "d.sock")
	raw, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := Listen(p, 0o600); !errors.Is(err, ErrInUse) {
		t.Fatalf("got %v, want ErrInUse", err)
	}
}

func TestRefusesNonSocketAndLongPath(t *testing.T) {
	d := shortDir(t)
	p := filepath.Join(d, "file")
	os.WriteFile(p, []byte("x"), 0o600)
	if _, err := Listen(p, 0o600); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("got %v", err)
	}
	long := filepath.Join(d, strings.Repeat("a", MaxPathLen()))
	if _, err := Listen(long, 0o600); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("got %v", err)
	}
}
