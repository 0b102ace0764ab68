package api

import "testing"

func TestLoopbackHostAndOrigin(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:7777": true, "LOCALHOST:7777": true, "[::1]:7777": true, "127.0.0.2:7777": true,
		"127.0.0.1:7778": false, "evil.example:7777": false, "127.0.0.1.nip.io:7777": false, "localhost": false,
		"": false, "[::1]": false, "0.0.0.0:7777": false, "localhost.evil.example:7777": false,
	} {
		if got := loopbackHostPort(host, "80", "7777"); got != want {
			t.Errorf("Host %q: %v, want %v", host, got, want)
		}
	}
	if !loopbackHostPort("localhost", "80", "80") || !loopbackHostPort("[::1]", "80", "80") {
		t.Error("a Host without a port is port 80")
	}
	for origin, want := range map[string]bool{
		"http://127.0.0.1:7777": true, "https://localhost:7777": true, "http://[::1]:7777": true, "http://localhost:7777/": true,
		"http://evil.example:7777": false, "http://localhost:8888": false, "http://localhost": false, "null": false,
		"file://": false, "chrome-extension://abc": false, "http://u@localhost:7777": false, "": false,
	} {
		if got := loopbackOrigin(origin, "7777"); got != want {
			t.Errorf("Origin %q: %v, want %v", origin, got, want)
		}
	}
	for _, c := range []struct {
		origin, host string
		want         bool
	}{
		{"http://localhost:1234", "d", true},
		{"http://continuityd", "continuityd", true},
		{"https://evil.example", "evil.example", false}, // a proxy's rebound name
		{"http://evil.example:80", "evil.example:80", false},
		{"https://evil.example", "continuityd", false},
		{"null", "d", false},
	} {
		if got := socketOrigin(c.origin, c.host); got != c.want {
			t.Errorf("socket Origin %q Host %q: %v, want %v", c.origin, c.host, got, c.want)
		}
	}
}
