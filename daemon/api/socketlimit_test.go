package api

import (
	"bufio"
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSocketBoundsEachUser: one user holds at most PerUser connections,
// all users but root and the daemon's own at most Total-PerUser together,
// and root and the daemon's user find room up to Total; a place given
// back is taken again.
func TestSocketBoundsEachUser(t *testing.T) {
	var logs bytes.Buffer
	l := SocketListener(nil, SocketLimits{Total: 8, PerUser: 3}, slog.New(slog.NewTextHandler(&logs, nil))).(*socketListener)
	l.self = 1000
	const a, b, c = 5001, 5002, 5003
	for i := range 3 {
		if !l.take(a) {
			t.Fatalf("user %d's connection %d refused under its bound of 3", a, i+1)
		}
	}
	if l.take(a) {
		t.Fatal("a fourth connection of one user was taken over its bound of 3")
	}
	if !strings.Contains(logs.String(), "uid 5001") || !strings.Contains(logs.String(), "per_user=3") {
		t.Errorf("the refusal is not logged naming the user and the bound: %s", logs.String())
	}
	// Others together: Total-PerUser = 5.
	first, second := l.take(b), l.take(b)
	if !first || !second || l.take(c) {
		t.Fatalf("users other than root and the daemon's: want 5 of 8 places, then none (open %v)", l.open)
	}
	// Root and the daemon's own user have the rest.
	for _, uid := range []uint32{0, 1000, 0} {
		if !l.take(uid) {
			t.Fatalf("uid %d refused with %d of 8 open", uid, l.total)
		}
	}
	if l.take(0) {
		t.Fatal("root's connection taken over the total of 8")
	}
	l.give(a)
	if !l.take(c) {
		t.Fatal("a place given back was not taken again")
	}
	if l.open[a] != 2 || l.open[c] != 1 || l.total != 8 || l.others != 5 {
		t.Errorf("counts: open %v total %d others %d", l.open, l.total, l.others)
	}
}

// TestSocketListenerRefusesOverTheBound: on a real Unix socket, a
// connection over the bound is answered 503 TOO_MANY_CONNECTIONS and
// closed without Accept waiting, the ones within it carry their peer's
// credentials, and a closed one gives its place back.
func TestSocketListenerRefusesOverTheBound(t *testing.T) {
	dir, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	inner, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	l := SocketListener(inner, SocketLimits{Total: 2, PerUser: 1}, nil)
	defer l.Close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("unix", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	over := dial()
	third := dial()
	var held []net.Conn
	for range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cred, err := c.(peerConn).peerCred()
		if err != nil || cred.UID != uint32(os.Getuid()) || cred.PID != os.Getpid() {
			t.Errorf("peer %+v %v, want this process", cred, err)
		}
		held = append(held, c)
	}
	// The next Accept refuses over, closes it, and waits for the next.
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body.String(), `"TOO_MANY_CONNECTIONS"`) {
		t.Fatalf("over the bound: %d %s", resp.StatusCode, body.String())
	}
	// third was refused too (nothing was given back yet): it reads the
	// same answer. Then a place given back is taken by the next one.
	if resp, err := http.ReadResponse(bufio.NewReader(third), nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third over the bound: %v %v", resp, err)
	}
	held[0].Close()
	dial()
	c, ok := <-accepted
	if !ok {
		t.Fatal("Accept failed")
	}
	c.Close()
}
