package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/continuityd/continuityd/internal/safefile"
)

// maxTokenFile bounds how much of a token file is read: a token is short,
// and a large file is the wrong file.
const maxTokenFile = 64 << 10

// Token returns the upstream's credential: the value of the environment
// variable token_env names (which must be set and not empty) or the trimmed
// content of token_file (which must not be open to group or others). A local
// upstream has none and gets "". Errors name where the token was looked for,
// never the token.
func (u Upstream) Token() (string, error) {
	switch {
	case u.Kind == KindLocal:
		return "", nil
	case u.TokenEnv != "":
		v, ok := os.LookupEnv(u.TokenEnv)
		if !ok {
			return "", fmt.Errorf("config: token_env: environment variable %s is not set", u.TokenEnv)
		}
		if v = strings.TrimSpace(v); v == "" {
			return "", fmt.Errorf("config: token_env: environment variable %s is empty", u.TokenEnv)
		}
		if strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("config: token_env: environment variable %s holds more than one line", u.TokenEnv)
		}
		return v, nil
	case u.TokenFile != "":
		return readTokenFile(u.TokenFile)
	}
	return "", errors.New("config: the upstream has neither token_env nor token_file")
}

func readTokenFile(name string) (string, error) {
	// A link is followed (secret mounts use them), but what it reaches
	// must be a regular file: a FIFO is never waited on. The mode checked
	// is the open file's, not the name's.
	f, fi, err := safefile.OpenFollow(name)
	if err != nil {
		return "", fmt.Errorf("config: token_file: %w", err)
	}
	defer f.Close()
	// Windows has no such mode bits; there the file's ACL is the user's care.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return "", fmt.Errorf("config: token_file %s has mode %04o, open to group or others; a token file must be private to its owner (chmod 600 %s)", name, perm, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("config: token_file: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("config: token_file %s is larger than %d KiB; it should hold only a token", name, maxTokenFile>>10)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("config: token_file %s is empty", name)
	}
	// A token goes into a header, where a line break would end it early.
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("config: token_file %s holds more than one line", name)
	}
	return tok, nil
}
