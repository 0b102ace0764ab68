package config

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
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
	if u.Kind == KindLocal {
		return "", nil
	}
	return readToken(u.TokenEnv, u.TokenFile, "the upstream")
}

// HasToken reports whether the upstream names a token (token_env or
// token_file). A delx upstream need not: its agents have their own.
func (u Upstream) HasToken() bool { return u.TokenEnv != "" || u.TokenFile != "" }

// Token returns the identity's token, read like an upstream's (see
// Upstream.Token) at every call, so a renewed token applies at once.
func (i DelxIdentity) Token() (string, error) {
	return readToken(i.TokenEnv, i.TokenFile, "the identity")
}

// ReadSecretFile reads a one-line secret from a file the operator named
// (such as a registration key): a regular file (a link to one is
// followed) private to its owner, at most 64 KiB, trimmed. Errors name the
// file, never its content.
func ReadSecretFile(name string) (string, error) {
	return readSecret(name, "file")
}

func readToken(env, file, what string) (string, error) {
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("config: token_env: environment variable %s is not set", env)
		}
		if v = strings.TrimSpace(v); v == "" {
			return "", fmt.Errorf("config: token_env: environment variable %s is empty", env)
		}
		if strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("config: token_env: environment variable %s holds more than one line", env)
		}
		return v, nil
	case file != "":
		return readSecret(file, "token_file")
	}
	return "", fmt.Errorf("config: %s has neither token_env nor token_file", what)
}

// readSecret reads the one-line secret in file name; errors call the file
// what (the key that named it).
func readSecret(name, what string) (string, error) {
	// A link is followed (secret mounts use them), but what it reaches
	// must be a regular file: a FIFO is never waited on. The mode checked
	// is the open file's, not the name's.
	f, fi, err := safefile.OpenFollow(name)
	if err != nil {
		return "", fmt.Errorf("config: %s: %w", what, err)
	}
	defer f.Close()
	// Windows has no such mode bits; there the file's ACL is the user's care.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return "", fmt.Errorf("config: %s %s has mode %04o, open to group or others; a secret file must be private to its owner (chmod 600 %s)", what, name, perm, name)
	}
	b, err := safefile.ReadAll(f, fi, name, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("config: %s: %w", what, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("config: %s %s is empty", what, name)
	}
	// A token goes into a header, where a line break would end it early.
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("config: %s %s holds more than one line", what, name)
	}
	return tok, nil
}

// CheckSecretFiles reads every token_file the configuration names (the
// upstreams' and the agents' Delx identities') as the daemon would, and
// returns what is wrong with each, naming its key: a file missing, a FIFO
// or anything else not a regular file, one open to group or others, empty,
// or of more than one line. `config check` reports them; the daemon itself
// reads a token at each call, so a file put right later applies at once.
func (c *Config) CheckSecretFiles() []error {
	var errs []error
	check := func(key, file string) {
		if file == "" {
			return
		}
		if _, err := readSecret(file, key); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		check(joinKey("upstream."+name, "token_file"), c.Upstreams[name].TokenFile)
	}
	for _, a := range c.Agents {
		for _, up := range slices.Sorted(maps.Keys(a.Identity)) {
			check("agent."+a.Name+".identity."+up+".token_file", a.Identity[up].TokenFile)
		}
		for _, up := range slices.Sorted(maps.Keys(a.DelxFleet)) {
			check("agent."+a.Name+".delx_fleet."+up+".token_file", a.DelxFleet[up].TokenFile)
		}
	}
	return errs
}
