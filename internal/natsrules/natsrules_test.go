package natsrules

import (
	"strings"
	"testing"
)

// The limits at their boundaries: the last value in and the first out.
func TestLimitsAtTheirBoundaries(t *testing.T) {
	tok := func(n int) string { return strings.Repeat("a", n) }
	prefix := func(tokens, each int) string {
		parts := make([]string, tokens)
		for i := range parts {
			parts[i] = tok(each)
		}
		return strings.Join(parts, ".")
	}
	for _, c := range []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"stream of 64", func() error { return CheckStream(tok(64)) }, true},
		{"stream of 65", func() error { return CheckStream(tok(65)) }, false},
		{"empty stream", func() error { return CheckStream("") }, false},
		{"stream with a dot", func() error { return CheckStream("A.B") }, false},
		{"stream with a wildcard", func() error { return CheckStream("A*") }, false},
		{"stream of every allowed character", func() error { return CheckStream("Az09-_") }, true},
		{"bucket of 64", func() error { return CheckBucket(tok(64)) }, true},
		{"bucket of 65", func() error { return CheckBucket(tok(65)) }, false},
		{"bucket with a space", func() error { return CheckBucket("a b") }, false},
		{"prefix of 8 tokens of 64", func() error { return CheckSubjectPrefix(prefix(8, 64)) }, true},
		{"prefix of 9 tokens", func() error { return CheckSubjectPrefix(prefix(9, 1)) }, false},
		{"prefix token of 65", func() error { return CheckSubjectPrefix(prefix(1, 65)) }, false},
		{"prefix of one token", func() error { return CheckSubjectPrefix("continuityd") }, true},
		{"empty prefix", func() error { return CheckSubjectPrefix("") }, false},
		{"prefix with an empty token", func() error { return CheckSubjectPrefix("a..b") }, false},
		{"prefix ending in a dot", func() error { return CheckSubjectPrefix("a.") }, false},
		{"prefix with *", func() error { return CheckSubjectPrefix("cd.*") }, false},
		{"prefix with >", func() error { return CheckSubjectPrefix("cd.>") }, false},
		{"replicas 1", func() error { return CheckReplicas(1) }, true},
		{"replicas 5", func() error { return CheckReplicas(5) }, true},
		{"replicas 0", func() error { return CheckReplicas(0) }, false},
		{"replicas 6", func() error { return CheckReplicas(6) }, false},
		{"nats url", func() error { return CheckServerURL("nats://a:4222") }, true},
		{"tls url with a slash", func() error { return CheckServerURL("tls://a:4222/") }, true},
		{"wss url", func() error { return CheckServerURL("wss://a") }, true},
		{"https url", func() error { return CheckServerURL("https://a") }, false},
		{"url with a path", func() error { return CheckServerURL("nats://a:4222/x") }, false},
		{"url with a query", func() error { return CheckServerURL("nats://a:4222?x=1") }, false},
		{"url without a host", func() error { return CheckServerURL("nats://:4222") }, false},
		{"url with a comma", func() error { return CheckServerURL("nats://a,nats://b") }, false},
		{"empty url", func() error { return CheckServerURL(" ") }, false},
		{"one way to authenticate", func() error { return CheckOneAuth(false, true, false) }, true},
		{"two ways to authenticate", func() error { return CheckOneAuth(true, false, true) }, false},
	} {
		if err := c.check(); (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if DefaultReplicas < MinReplicas || DefaultReplicas > MaxReplicas {
		t.Errorf("DefaultReplicas %d is outside %d..%d", DefaultReplicas, MinReplicas, MaxReplicas)
	}
	for _, err := range []error{CheckStream(DefaultStream), CheckBucket(DefaultBucket), CheckSubjectPrefix(DefaultSubjectPrefix)} {
		if err != nil {
			t.Errorf("a default breaks the rules: %v", err)
		}
	}
}

// A URL's credentials are refused and never repeated.
func TestServerURLNeverQuoted(t *testing.T) {
	err := CheckServerURL("nats://user:s3cretpw@a:4222")
	if err == nil || strings.Contains(err.Error(), "s3cretpw") || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("CheckServerURL with credentials = %v", err)
	}
}
