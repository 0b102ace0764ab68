package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateNATS(t *testing.T) {
	runErrCases(t, []errCase{
		{"url missing", src(`[upstream.fleet]`, `kind = "nats"`), "upstream.fleet.url", 1, 2, `is required for kind "nats"`},
		{"https url", src(`[upstream.fleet]`, `kind = "nats"`, `url = "https://nats.example"`), "upstream.fleet.url", 3, 1, "must be a nats://, tls://, ws:// or wss:// URL"},
		{"second url bad", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222,http://b"`), "upstream.fleet.url", 3, 1, "server 2 must be"},
		{"user in url", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://u:secretpw@a:4222"`), "upstream.fleet.url", 3, 1, "credentials in the url are not allowed"},
		{"two credentials", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `creds_file = "/etc/f.creds"`, `token_env = "T"`), "upstream.fleet.creds_file", 4, 1, "at most one of creds_file, nkey_file and token_env/token_file"},
		{"relative creds", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `creds_file = "f.creds"`), "upstream.fleet.creds_file", 4, 1, "must be an absolute path"},
		{"replicas 7", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `replicas = 7`), "upstream.fleet.replicas", 4, 1, "must be 1 to 5"},
		{"stream with dot", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `stream = "A.B"`), "upstream.fleet.stream", 4, 1, "JetStream stream name"},
		{"prefix wildcard", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `subject_prefix = "cd.*"`), "upstream.fleet.subject_prefix", 4, 1, "no wildcards"},
		{"bad window", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `conflict_window = "soon"`), "upstream.fleet.conflict_window", 4, 1, "duration"},
		{"snapshots not a bool", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `snapshots = "yes"`), "upstream.fleet.snapshots", 4, 1, "true or false"},
		{"snapshots on qday", src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`, `snapshots = true`), "upstream.qday.snapshots", 4, 1, "only a nats upstream takes snapshots"},
		{"stream on qday", src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`, `stream = "X"`), "upstream.qday.stream", 4, 1, "only a nats upstream takes stream"},
	})
	runOKCases(t, map[string]string{
		"open server": src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://127.0.0.1:4222"`),
		"cluster tls": src(`[upstream.fleet]`, `kind = "nats"`, `url = "tls://a:4222, tls://b:4222,tls://c:4222"`, `nkey_file = "/etc/f.nk"`, `replicas = 3`),
		"token":       src(`[upstream.nats]`, `url = "nats://a:4222"`, `token_file = "/etc/t"`),
	})
	c := mustDecode(t, src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222,nats://b:4222"`, `creds_file = "/etc/f.creds"`, `replicas = 3`, `conflict_window = "1m"`))
	u := c.Upstreams["fleet"]
	if got := u.URLs(); len(got) != 2 || got[1] != "nats://b:4222" {
		t.Errorf("URLs = %q", got)
	}
	if u.CredsFile != "/etc/f.creds" || u.Stream != "CONTINUITYD" || u.Bucket != "continuityd" || u.SubjectPrefix != "continuityd" ||
		u.Replicas != 3 || u.ConflictWindow.Duration != time.Minute || u.Rate != 50 || u.Burst != 100 || u.Timeout.Duration != 10*time.Second {
		t.Errorf("nats upstream = %+v", u)
	}
	if u.Snapshots {
		t.Errorf("snapshots is on without being asked for")
	}
	if u := mustDecode(t, src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, `snapshots = true`)).Upstreams["fleet"]; !u.Snapshots {
		t.Errorf("snapshots = true did not turn it on: %+v", u)
	}
}

// The nats rules' limits at their boundaries, through the file: the last
// value in is taken, the first out is refused naming its key. New applies
// the same rules (internal/natsrules), so nothing the file passes is
// refused when the daemon builds the client.
func TestValidateNATSLimits(t *testing.T) {
	prefix := func(tokens int) string {
		return strings.TrimSuffix(strings.Repeat(strings.Repeat("p", 64)+".", tokens), ".")
	}
	long := strings.Repeat("S", 64)
	fleet := func(line string) string {
		return src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222"`, line)
	}
	runErrCases(t, []errCase{
		{"prefix of 9 tokens", fleet(`subject_prefix = "` + prefix(9) + `"`), "upstream.fleet.subject_prefix", 4, 1, "at most 8 dot-separated tokens"},
		{"prefix token of 65", fleet(`subject_prefix = "a.` + long + `x"`), "upstream.fleet.subject_prefix", 4, 1, "tokens of 1 to 64"},
		{"stream of 65", fleet(`stream = "` + long + `x"`), "upstream.fleet.stream", 4, 1, "1 to 64"},
		{"bucket of 65", fleet(`bucket = "` + long + `x"`), "upstream.fleet.bucket", 4, 1, "1 to 64"},
		{"replicas 0", fleet(`replicas = 0`), "upstream.fleet.replicas", 4, 1, "must be 1 to 5"},
		{"replicas 6", fleet(`replicas = 6`), "upstream.fleet.replicas", 4, 1, "must be 1 to 5"},
		{"url with a path", src(`[upstream.fleet]`, `kind = "nats"`, `url = "nats://a:4222/x"`), "upstream.fleet.url", 3, 1, "server 1 must be scheme://host:port"},
	})
	c := mustDecode(t, fleet(`subject_prefix = "`+prefix(8)+`"`))
	if got := c.Upstreams["fleet"].SubjectPrefix; got != prefix(8) {
		t.Errorf("a prefix of 8 tokens of 64 = %q", got)
	}
	for _, line := range []string{`stream = "` + long + `"`, `bucket = "` + long + `"`, `replicas = 1`, `replicas = 5`} {
		mustDecode(t, fleet(line))
	}
}
