package config

import (
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/natsrules"
)

// A nats upstream's rules (names, limits, servers) are natsrules', which
// upstream/nats's New applies too; here they are applied to the file, so
// an error names the key and its line.

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
		if err := natsrules.CheckServerURL(s); err != nil {
			c.fail(urlKey, "server "+itoa(i+1)+" "+err.Error())
		}
	}
	if err := natsrules.CheckOneAuth(r.CredsFile != "", r.NKeyFile != "", r.TokenEnv != "" || r.TokenFile != ""); err != nil {
		c.fail(joinKey(p, "creds_file"), err.Error())
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
		if err := natsrules.CheckStream(r.Stream); err != nil {
			c.failGot(joinKey(p, "stream"), err.Error(), r.Stream)
		}
	}
	if r.Bucket != "" {
		u.Bucket = r.Bucket
		if err := natsrules.CheckBucket(r.Bucket); err != nil {
			c.failGot(joinKey(p, "bucket"), err.Error(), r.Bucket)
		}
	}
	if r.SubjectPrefix != "" {
		u.SubjectPrefix = r.SubjectPrefix
		if err := natsrules.CheckSubjectPrefix(r.SubjectPrefix); err != nil {
			c.failGot(joinKey(p, "subject_prefix"), err.Error(), r.SubjectPrefix)
		}
	}
	if r.Replicas != nil {
		if err := natsrules.CheckReplicas(*r.Replicas); err != nil {
			c.failGot(joinKey(p, "replicas"), err.Error(), *r.Replicas)
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
