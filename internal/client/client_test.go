package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/socktest"
)

// seen is one request as the server got it.
func ok(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

// The client's default agent goes with every call that names none.
func TestDoDefaultAgent(t *testing.T) {
	sock, got := socktest.Serve(t, ok)
	c := New(sock)
	defer c.Close()
	ctx := context.Background()
	c.Agent = "builder"
	if out, err := c.Do(ctx, http.MethodPost, "/v1/continuity/checkpoint", nil, []byte(`{"focus":"x"}`)); err != nil || string(out) != `{"ok":true}` {
		t.Fatalf("%s, %v", out, err)
	}
	c.Do(ctx, http.MethodGet, "/v1/continuity", url.Values{"agent": {"other"}, "peek": {"1"}}, nil)
	c.Agent = ""
	c.Do(ctx, http.MethodGet, "/v1/status", nil, nil)
	want := []socktest.Request{
		{Method: "POST", Path: "/v1/continuity/checkpoint", Query: "agent=builder", Body: `{"focus":"x"}`, ContentType: "application/json"},
		{Method: "GET", Path: "/v1/continuity", Query: "agent=other&peek=1", Body: "", ContentType: ""},
		{Method: "GET", Path: "/v1/status", Query: "", Body: "", ContentType: ""},
	}
	if g := got(); len(g) != len(want) {
		t.Fatalf("server saw %+v", g)
	} else {
		for i := range want {
			if g[i] != want[i] {
				t.Errorf("request %d: %+v, want %+v", i, g[i], want[i])
			}
		}
	}
}

// A refusal in the API's shape is an *APIError with its status, code,
// field and message; any other failure answer keeps its text.
func TestDoAPIError(t *testing.T) {
	sock, _ := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/capsule" {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "bad gateway")
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"code":"MOTIVE_REQUIRED","field":"decide.because","message":"say why"}}`)
	})
	c := New(sock)
	defer c.Close()
	_, err := c.Do(context.Background(), http.MethodPost, "/v1/continuity/checkpoint", nil, []byte(`{}`))
	var ae *APIError
	if !errors.As(err, &ae) || *ae != (APIError{Status: 400, Code: "MOTIVE_REQUIRED", Field: "decide.because", Message: "say why"}) {
		t.Fatalf("%#v", err)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Error("a refusal is no unreachable daemon")
	}
	if ae.Error() != "400 MOTIVE_REQUIRED: decide.because: say why" {
		t.Errorf("Error() = %q", ae.Error())
	}
	_, err = c.Do(context.Background(), http.MethodGet, "/v1/capsule", nil, nil)
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "HTTP_502" || ae.Message != "bad gateway" {
		t.Errorf("%#v", err)
	}
}

// Nobody at the socket: ErrUnreachable, naming the socket and why in
// words, with none of the HTTP client's wrapping (Get "http://…": dial
// unix …).
func TestDoUnreachable(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ sock, why string }{
		"missing":      {filepath.Join(dir, "none.sock"), "no socket there"},
		"not a socket": {dir, "nothing listens there"},
	} {
		c, sock := New(tc.sock), tc.sock
		_, err := c.Do(context.Background(), http.MethodGet, "/healthz", nil, nil)
		if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), sock+": "+tc.why) {
			t.Errorf("%s: %v, want ErrUnreachable naming %s: %s", name, err, sock, tc.why)
		}
		if err != nil && (strings.Contains(err.Error(), "http://") || strings.Contains(err.Error(), "dial unix")) {
			t.Errorf("%s: %v shows the HTTP client's wrapping", name, err)
		}
		var ae *APIError
		if errors.As(err, &ae) {
			t.Errorf("%s: an APIError for no answer at all", name)
		}
		c.Close()
	}
	// A socket whose daemon has gone (a file left behind).
	sock, _ := socktest.Serve(t, ok)
	ln, err := net.Listen("unix", sock+"2")
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	c := New(sock + "2")
	defer c.Close()
	if _, err := c.Do(context.Background(), http.MethodGet, "/healthz", nil, nil); !errors.Is(err, ErrUnreachable) || !strings.HasSuffix(err.Error(), ": nothing listens there (a daemon that stopped?)") {
		t.Errorf("a dead socket: %v, want ErrUnreachable: nothing listens there", err)
	}
}

// A daemon that takes the connection but never answers: the request ends
// within the client's budget, as ErrUnreachable and ErrNoAnswer; when the
// caller's own context ends first, the caller's error comes back as it is.
func TestDoNoAnswer(t *testing.T) {
	sock, _ := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := New(sock)
	defer c.Close()
	c.Timeout = 50 * time.Millisecond
	_, err := c.Do(context.Background(), http.MethodGet, "/v1/status", nil, nil)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "50ms") {
		t.Errorf("client timeout: %v, want ErrUnreachable and ErrNoAnswer within 50ms", err)
	}

	c.Timeout = 0 // DefaultTimeout; the caller gives less
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Do(ctx, http.MethodGet, "/v1/status", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnreachable) {
		t.Errorf("caller's deadline: %v, want context.DeadlineExceeded as it is", err)
	}
}

// A call's budget: the client's bound, plus what the call waits by design
// (package ops says how long each operation waits).
func TestTimeoutBudget(t *testing.T) {
	c := New("unused")
	if got := c.timeout(0); got != DefaultTimeout {
		t.Errorf("no wait: %v, want %v", got, DefaultTimeout)
	}
	if got := c.timeout(90 * time.Second); got != DefaultTimeout+90*time.Second {
		t.Errorf("a 90 s wait: %v", got)
	}
	c.Timeout = time.Second
	if got := c.timeout(5 * time.Second); got != 6*time.Second {
		t.Errorf("Timeout 1s, wait 5 s: %v", got)
	}
}
