// Package socktest is for tests only: an HTTP server on a real Unix socket
// that records what it was asked, for the clients of the daemon's socket
// (internal/client, the MCP server's socket backend) to be tested against.
package socktest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Request is one request as the server saw it.
type Request struct {
	Method, Path, Query, Body, ContentType string
}

// Serve runs h on a real Unix socket until the test ends. It returns the
// socket's path and a function that returns the requests seen since its
// last call.
func Serve(t testing.TB, h http.HandlerFunc) (socket string, take func() []Request) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket = filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []Request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, Request{r.Method, r.URL.Path, r.URL.RawQuery, string(body), r.Header.Get("Content-Type")})
		mu.Unlock()
		h(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return socket, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}
