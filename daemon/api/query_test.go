package api

import (
	"net/url"
	"testing"
)

// queryGet answers as url.ParseQuery(raw).Get(key) does, for the queries
// agents send and for the ones ParseQuery refuses in part.
func TestQueryGetIsParseQueryGet(t *testing.T) {
	raws := []string{"", "agent=a1", "agent=a1&peek=1", "peek=1&agent=a%201", "agent=a+b&agent=c",
		"agent=%zz&agent=b", "agent;x=1&agent=b", "&&agent=&peek", "a%67ent=x", "agent", "agent=1=2",
		"cwd=%2Fhome%2Fu%2Fp&agent=", "local=true;&local=0", "%=1&agent=ok", "agent=%", "peek=1&peek=0"}
	keys := []string{"agent", "peek", "cwd", "local", "", "a g"}
	for _, raw := range raws {
		want, _ := url.ParseQuery(raw)
		for _, key := range keys {
			if got := queryGet(raw, key); got != want.Get(key) {
				t.Errorf("queryGet(%q, %q) = %q, url.ParseQuery says %q", raw, key, got, want.Get(key))
			}
		}
	}
}

func FuzzQueryGet(f *testing.F) {
	f.Add("agent=a1&peek=1", "agent")
	f.Add("agent=%zz&agent=b;c&agent=d+e", "agent")
	f.Fuzz(func(t *testing.T, raw, key string) {
		want, _ := url.ParseQuery(raw)
		if got := queryGet(raw, key); got != want.Get(key) {
			t.Errorf("queryGet(%q, %q) = %q, url.ParseQuery says %q", raw, key, got, want.Get(key))
		}
	})
}
