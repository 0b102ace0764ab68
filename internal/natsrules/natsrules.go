// Package natsrules holds the rules a nats (fleet) upstream's settings obey
// and their defaults, in one place: config checks a config file with them,
// so its errors name the key and its line, and upstream/nats's New checks
// its Options with them, so a client built without a config file meets the
// same rules. It sits below both (config cannot import upstream/nats).
//
// Each Check function returns nil or an error phrased to follow the name
// of what was checked ("must be ..."); it never repeats the value, which a
// caller quotes if it is safe to (a server URL may hold a secret).
package natsrules

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of a nats upstream's settings.
const (
	DefaultStream        = "CONTINUITYD"
	DefaultBucket        = "continuityd"
	DefaultSubjectPrefix = "continuityd"
	DefaultReplicas      = 1
	// DefaultTimeout bounds one publish or request.
	DefaultTimeout = 10 * time.Second
	// DefaultConflictWindow is how long after another writer's last sign
	// of life a conflict is still reported.
	DefaultConflictWindow = 10 * time.Minute
)

// Limits.
const (
	// MaxNameLen bounds a stream or bucket name and each token of the
	// subject prefix.
	MaxNameLen = 64
	// MaxPrefixTokens bounds the subject prefix's tokens: with an agent
	// name and a write kind after it, a subject stays far below the
	// server's 4 KiB control line.
	MaxPrefixTokens = 8
	// MinReplicas and MaxReplicas bound the replicas of a stream or bucket
	// the client creates (JetStream's own limits).
	MinReplicas = 1
	MaxReplicas = 5
)

// validToken reports whether s is one subject token (or a whole stream or
// bucket name): 1 to MaxNameLen letters, digits, '-' or '_'; no dots,
// spaces or wildcards, which NATS would read as subject syntax. A loop, not
// a regexp: nothing is compiled when a client command starts.
func validToken(s string) bool {
	if len(s) < 1 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckStream checks a JetStream stream name.
func CheckStream(name string) error {
	if !validToken(name) {
		return errors.New("must be 1 to 64 letters, digits, '-' or '_' (a JetStream stream name)")
	}
	return nil
}

// CheckBucket checks a key-value bucket name (the snapshot object store
// is named after it too).
func CheckBucket(name string) error {
	if !validToken(name) {
		return errors.New("must be 1 to 64 letters, digits, '-' or '_' (a key-value bucket name)")
	}
	return nil
}

// CheckSubjectPrefix checks the prefix of every subject the upstream uses.
func CheckSubjectPrefix(prefix string) error {
	tokens := strings.Split(prefix, ".")
	if len(tokens) > MaxPrefixTokens {
		return fmt.Errorf("must be at most %d dot-separated tokens (it has %d)", MaxPrefixTokens, len(tokens))
	}
	for _, t := range tokens {
		if !validToken(t) {
			return errors.New("must be dot-separated tokens of 1 to 64 letters, digits, '-' or '_' (no wildcards)")
		}
	}
	return nil
}

// CheckReplicas checks the replicas of a stream or bucket the client creates.
func CheckReplicas(n int64) error {
	if n < MinReplicas || n > MaxReplicas {
		return fmt.Errorf("must be %d to %d (3 for a three-node cluster)", MinReplicas, MaxReplicas)
	}
	return nil
}

// CheckServerURL checks one server's URL: a scheme the client speaks, a
// host, and nothing else; never credentials. The error never quotes the
// URL: it may hold a secret by mistake.
func CheckServerURL(raw string) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return errors.New("is empty")
	}
	if strings.Contains(raw, ",") {
		return errors.New("holds a comma; give each server as its own URL")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("is not a valid URL")
	case u.User != nil:
		return errors.New("carries credentials, and credentials in the url are not allowed; use creds_file, nkey_file, token_env or token_file")
	case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
		return errors.New("must be a nats://, tls://, ws:// or wss:// URL (tls:// and wss:// for TLS)")
	case u.Hostname() == "":
		return errors.New("must name a host")
	case u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return errors.New("must be scheme://host:port, without a path, query or fragment")
	}
	return nil
}

// CheckOneAuth checks that at most one way to authenticate is set.
func CheckOneAuth(credsFile, nkeyFile, tokenSet bool) error {
	n := 0
	for _, set := range []bool{credsFile, nkeyFile, tokenSet} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("set at most one of creds_file, nkey_file and token_env/token_file")
	}
	return nil
}
