// Package safesocket opens the daemon's Unix socket the careful way: it
// refuses to start beside a live daemon, replaces a socket left behind by a
// crashed one, creates the parent directory no more open than the socket,
// and sets the socket's mode before anyone can use it. PeerCred tells who
// is at the other end of a connection, as the kernel recorded it.
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

// Listen listens on the Unix socket at path with file mode perm. A missing
// parent directory is created private (0700), or searchable by whom perm
// lets in (0750 for a group socket), since they could not reach the socket
// otherwise; an existing one is left as it is. A second process calling
// Listen for the same path while the first lives gets ErrInUse.
func Listen(path string, perm fs.FileMode) (net.Listener, error) {
	if len(path) > MaxPathLen() {
		return nil, fmt.Errorf("socket path %q is %d bytes; this platform allows at most %d: choose a shorter daemon.socket", path, len(path), MaxPathLen())
	}
	if err := makeDir(filepath.Dir(path), dirPerm(perm)); err != nil {
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

// dirPerm is the mode of a socket directory we create: searchable by the
// classes (group, others) the socket's mode lets read or write it.
func dirPerm(perm fs.FileMode) fs.FileMode {
	d := fs.FileMode(0o700)
	if perm&0o060 != 0 {
		d |= 0o050
	}
	if perm&0o006 != 0 {
		d |= 0o005
	}
	return d
}

// makeDir creates dir with mode perm (whatever the umask) when it is
// missing.
func makeDir(dir string, perm fs.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
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
