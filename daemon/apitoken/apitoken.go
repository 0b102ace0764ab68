// Package apitoken keeps the loopback listener's token, its only
// credential: the file api.token in the state directory, made once
// (private, never through a link planted at its name) and used only while
// it is still the daemon's own private regular file. The daemon reads it
// at start and again at each reload, so a token removed or changed takes
// effect then.
package apitoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/safefile"
)

// FileName is the loopback listener's token file in the state
// directory.
const FileName = "api.token"

// maxAPITokenFile bounds what is read of api.token: the daemon writes 65
// bytes, and a large file is the wrong file.
const maxAPITokenFile = 64 << 10

// LoadOrCreate returns the loopback API token, creating it (mode 0600)
// on first use. The token is the listener's only credential, so an
// existing file is used only if it is the daemon's own secret: a regular
// file, not a symbolic link (a link to /etc/hostname would make the host
// name the token), owned by the daemon's user and readable by no one else.
// Otherwise the listener is refused with an error naming the file, what is
// wrong and the way out.
func LoadOrCreate(stateDir string) (string, error) {
	path := filepath.Join(stateDir, FileName)
	tok, err := readAPIToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", err
	}
	tok = randomToken()
	// O_EXCL: never through a link planted at the name (O_CREATE|O_EXCL
	// does not follow one), never over a file made meanwhile.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readAPIToken(path) // made meanwhile: it gets the same checks
	}
	if err != nil {
		return "", fmt.Errorf("write api token: %w", err)
	}
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write api token %s: %w", path, err)
	}
	return tok, nil
}

// readAPIToken reads an existing api.token after checking it; an error
// satisfying errors.Is(err, fs.ErrNotExist) means there is none.
func readAPIToken(path string) (string, error) {
	f, fi, err := safefile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err != nil {
		return "", refuseAPIToken(path, err)
	}
	defer f.Close()
	if err := safefile.CheckPrivate(fi, path); err != nil {
		return "", refuseAPIToken(path, err)
	}
	b, err := safefile.ReadAll(f, fi, path, maxAPITokenFile)
	if err != nil {
		return "", refuseAPIToken(path, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", refuseAPIToken(path, fmt.Errorf("%s is empty", path))
	case strings.ContainsAny(tok, "\r\n"):
		return "", refuseAPIToken(path, fmt.Errorf("%s holds more than one line", path))
	}
	return tok, nil
}

// refuseAPIToken says why api.token is not used and what to do.
func refuseAPIToken(path string, err error) error {
	if errors.Is(err, safefile.ErrNotPrivate) {
		// The check's own words say how to fix it.
		return fmt.Errorf("daemon.listen: the loopback listener's api token is refused: %w", err)
	}
	return fmt.Errorf("daemon.listen: the loopback listener's api token is refused: %w; remove %s to have a new one made", err, path)
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
