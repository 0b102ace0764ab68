// Package safesocket opens the daemon's Unix socket the careful way: it
// refuses to start beside a live daemon, replaces a socket left behind by a
// crashed one, creates the parent directory private, and sets the socket's
// mode before anyone can use it.
package safesocket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// ErrInUse is returned by Listen when a live daemon already answers on the
// socket.
var ErrInUse = errors.New("another continuityd is already listening on this socket")

// MaxPathLen is the longest socket path the platform accepts (sun_path less
// its terminating NUL).
func MaxPathLen() int {
	switch runtime.GOOS {
	case "linux", "windows":
		return 107
	default: // darwin and the BSDs
		return 103
	}
}

// Listen listens on the Unix socket at path with file mode perm. The parent
// directory is created with mode 0700 when missing. A second process calling
// Listen for the same path while the first lives gets ErrInUse.
func Listen(path string, perm fs.FileMode) (net.Listener, error) {
	if len(path) > MaxPathLen() {
		return nil, fmt.Errorf("socket path %q is %d bytes; this platform allows at most %d: choose a shorter daemon.socket", path, len(path), MaxPathLen())
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	// The lock serialises two daemons starting at the same moment: without it
	// both could find the socket stale and the second would unlink the
	// first's fresh socket.
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("%w (%s)", ErrInUse, path)
		}
		return nil, err
	}
	if err := removeStale(path); err != nil {
		unlock()
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		unlock()
		return nil, err
	}
	if err := os.Chmod(path, perm); err != nil {
		ln.Close()
		unlock()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return &listener{Listener: ln, unlock: unlock}, nil
}

// removeStale removes a socket file no process answers on. It refuses to
// touch anything that is not a socket, and reports a live one as ErrInUse.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
	}
	if c, err := net.DialTimeout("unix", path, 500*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%w (%s)", ErrInUse, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

type listener struct {
	net.Listener
	unlock func()
}

func (l *listener) Close() error {
	err := l.Listener.Close() // unlinks the socket file
	l.unlock()
	return err
}
