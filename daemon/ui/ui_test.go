package ui

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The page's assets (script, style) and templates together stay small:
// at most 150 KB compressed, so the page needs no bundler and loads at
// once.
func TestAssetsAreSmall(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, fsys := range []fs.FS{assetFiles, templateFiles} {
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			zw.Write(b)
			return err
		})
	}
	zw.Close()
	if buf.Len() > 150<<10 {
		t.Errorf("the page's assets and templates are %d bytes compressed, over 150 KB", buf.Len())
	}
	t.Logf("assets and templates: %d bytes compressed", buf.Len())
}

// A ticket opens one session, once, within its minute; sessions end at
// their TTL and at revoke (a user's own, or all).
func TestSessions(t *testing.T) {
	s := newSessions(time.Hour)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	tk := s.newTicket(Identity{UID: 7, GID: 7})
	cookie, sess, ok := s.redeem(tk)
	if !ok || sess.id.UID != 7 || cookie == "" || sess.csrf == "" || sess.csrf == cookie {
		t.Fatalf("redeem: %v %+v", ok, sess)
	}
	if _, _, ok := s.redeem(tk); ok {
		t.Error("a ticket opened a second session")
	}
	late := s.newTicket(Identity{UID: 7})
	now = now.Add(TicketTTL + time.Second)
	if _, _, ok := s.redeem(late); ok {
		t.Error("an expired ticket opened a session")
	}
	if _, ok := s.lookup(cookie); !ok {
		t.Fatal("the session ended early")
	}
	other, _, _ := s.redeem(s.newTicket(Identity{UID: 8}))
	if n := s.revoke(7, false); n != 1 {
		t.Errorf("revoke uid 7 ended %d sessions", n)
	}
	if _, ok := s.lookup(other); !ok {
		t.Error("revoking uid 7's sessions ended uid 8's")
	}
	now = now.Add(time.Hour + time.Second)
	if _, ok := s.lookup(other); ok {
		t.Error("a session outlived its TTL")
	}
	if !csrfMatches(sess, sess.csrf) || csrfMatches(sess, "") || csrfMatches(sess, sess.csrf+"x") {
		t.Error("csrfMatches")
	}
}

// The kernel's table names this process's own user as the owner of a
// loopback connection it opened.
func TestPeerUIDOfALoopbackConnection(t *testing.T) {
	if !peerUIDKnown {
		t.Skip("the platform does not say")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	uid, err := peerUID(sc.LocalAddr(), sc.RemoteAddr())
	if err != nil || int(uid) != os.Getuid() {
		t.Fatalf("peerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
	if _, err := peerUID(sc.LocalAddr(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}); err == nil {
		t.Error("a connection that does not exist was given an owner")
	}
}

// A diff's control characters are shown escaped and its credential
// shapes redacted, on both layouts.
func TestDiffIsEscapedAndRedacted(t *testing.T) {
	key := "AKIA" + "QYLPMN5HHHFPZAM2"
	d := &ops.DiffAnswer{Diff: "diff --git a/x\x1b[31m.go b/x\x1b[31m.go\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\x07line\n+aws_access_key_id = " + key + "\n"}
	for _, split := range []bool{false, true} {
		files, _ := parseDiff(d, split)
		var all strings.Builder
		for _, f := range files {
			all.WriteString(f.Path + "\n")
			for _, l := range f.Lines {
				all.WriteString(l.Text + "\n")
			}
			for _, r := range f.Rows {
				all.WriteString(r.Old.Text + "|" + r.New.Text + "\n")
			}
		}
		out := all.String()
		if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, key) || !strings.Contains(out, `\033[31m`) || !strings.Contains(out, redactMarker) {
			t.Errorf("split %v: %q", split, out)
		}
	}
}

// The door refuses before any view runs: a request for another Host, one
// from another origin, one without a session; and it puts its headers on
// every answer.
func TestDoorRefusesBeforeTheViews(t *testing.T) {
	s := New(Options{API: http.NotFoundHandler()})
	h := s.Handler("4242")
	for _, c := range []struct {
		host, origin string
		status       int
	}{
		{"evil.example:4242", "", 403},
		{"127.0.0.1:4242", "http://evil.example", 403},
		{"127.0.0.1:4242", "", 401},
		{"localhost:4242", "http://localhost:4242", 401},
	} {
		r := httptest.NewRequest("GET", "/ui/", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%+v: %d %v", c, w.Code, w.Header())
		}
	}
}
