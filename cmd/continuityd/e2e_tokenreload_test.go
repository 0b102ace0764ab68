package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAPITokenRevokedAtReload: `rm api.token` and SIGHUP end the old
// token's validity on the loopback listener at once (a new token is made
// and taken); a token replaced in the file and SIGHUP likewise.
func TestAPITokenRevokedAtReload(t *testing.T) {
	t.Parallel()
	w, addr := listenWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.terminate(t)
	path := filepath.Join(w.state, "api.token")
	readToken := func() string {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(raw))
	}
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	status := func(tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	old := readToken()
	if s := status(old); s != 200 {
		t.Fatalf("the token before any reload: %d", s)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() string { return "the removed token is still taken after SIGHUP:\n" + p.stderr.String() },
		func() bool { return status(old) == 401 })
	made := readToken()
	if made == old || status(made) != 200 {
		t.Fatalf("the token made at the reload (%v the old one) is not taken", made == old)
	}

	replaced := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(path, []byte(replaced+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() string { return "the replaced token is still taken after SIGHUP:\n" + p.stderr.String() },
		func() bool { return status(made) == 401 })
	if s := status(replaced); s != 200 {
		t.Fatalf("the token written into api.token: %d after SIGHUP", s)
	}
}
