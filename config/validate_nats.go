package config

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// natsName is a JetStream stream or bucket name: no dots, spaces or
// wildcards (they would be read as subject tokens).
var natsName = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}$`)

// natsPrefix is a subject prefix: dot-separated tokens of the same
// characters, no wildcards.
var natsPrefix = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$`)

// notNATS refuses the keys only a nats upstream takes.
func (c *checker) notNATS(p string, r rawUpstream) {
	for _, k := range []struct {
		key string
		set bool
	}{
		{"creds_file", r.CredsFile != ""}, {"nkey_file", r.NKeyFile != ""},
		{"stream", r.Stream != ""}, {"bucket", r.Bucket != ""}, {"subject_prefix", r.SubjectPrefix != ""},
		{"replicas", r.Replicas != nil}, {"conflict_window", r.ConflictWindow != nil},
		{"snapshots", r.Snapshots != nil},
	} {
		if k.set {
			c.fail(joinKey(p, k.key), `only a nats upstream takes `+k.key)
		}
	}
}

// nats checks a fleet upstream: its servers, at most one way to
// authenticate, and the names it uses.
func (c *checker) nats(p string, r rawUpstream, u *Upstream) {
	urlKey := joinKey(p, "url")
	if strings.TrimSpace(r.URL) == "" {
		c.fail(urlKey, `is required for kind "nats": one or more servers, e.g. "nats://nats-1:4222,nats://nats-2:4222"`)
	}
	for i, s := range u.URLs() {
		// The value is never repeated: it may hold credentials.
		v, err := url.Parse(s)
		switch {
		case err != nil:
			c.fail(urlKey, "server "+itoa(i+1)+" is not a valid URL")
		case v.User != nil:
			c.fail(urlKey, "credentials in the url are not allowed; use creds_file, nkey_file, token_env or token_file")
		case v.Scheme != "nats" && v.Scheme != "tls" && v.Scheme != "ws" && v.Scheme != "wss":
			c.fail(urlKey, "server "+itoa(i+1)+" must be a nats://, tls://, ws:// or wss:// URL (tls:// and wss:// for TLS)")
		case v.Hostname() == "":
			c.fail(urlKey, "server "+itoa(i+1)+" must name a host")
		case v.RawQuery != "" || v.Fragment != "" || (v.Path != "" && v.Path != "/"):
			c.fail(urlKey, "server "+itoa(i+1)+" must be scheme://host:port, without a path, query or fragment")
		}
	}
	n := 0
	for _, set := range []bool{r.CredsFile != "", r.NKeyFile != "", r.TokenEnv != "" || r.TokenFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		c.fail(joinKey(p, "creds_file"), "set at most one of creds_file, nkey_file and token_env/token_file")
	}
	if u.HasToken() {
		c.token(p, KindNATS, u)
	}
	if r.CredsFile != "" {
		u.CredsFile, _ = c.absPath(joinKey(p, "creds_file"), r.CredsFile)
	}
	if r.NKeyFile != "" {
		u.NKeyFile, _ = c.absPath(joinKey(p, "nkey_file"), r.NKeyFile)
	}
	c.caFile(p, r, u)
	if r.Stream != "" {
		u.Stream = r.Stream
		if !natsName.MatchString(r.Stream) {
			c.failGot(joinKey(p, "stream"), "must be 1 to 64 letters, digits, '-' or '_' (a JetStream stream name)", r.Stream)
		}
	}
	if r.Bucket != "" {
		u.Bucket = r.Bucket
		if !natsName.MatchString(r.Bucket) {
			c.failGot(joinKey(p, "bucket"), "must be 1 to 64 letters, digits, '-' or '_' (a key-value bucket name)", r.Bucket)
		}
	}
	if r.SubjectPrefix != "" {
		u.SubjectPrefix = r.SubjectPrefix
		if !natsPrefix.MatchString(r.SubjectPrefix) {
			c.failGot(joinKey(p, "subject_prefix"), "must be dot-separated tokens of letters, digits, '-' or '_' (no wildcards)", r.SubjectPrefix)
		}
	}
	if r.Replicas != nil {
		if *r.Replicas < 1 || *r.Replicas > 5 {
			c.failGot(joinKey(p, "replicas"), "must be 1 to 5 (3 for a three-node cluster)", *r.Replicas)
		} else {
			u.Replicas = int(*r.Replicas)
		}
	}
	if r.Snapshots != nil {
		u.Snapshots = *r.Snapshots
	}
	u.ConflictWindow = c.timeout(joinKey(p, "conflict_window"), r.ConflictWindow, u.ConflictWindow.Duration)
}

func itoa(i int) string { return strconv.Itoa(i) }
