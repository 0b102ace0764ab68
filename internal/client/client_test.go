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

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/socktest"
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

func TestResumeAndSignal(t *testing.T) {
	sock, got := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/continuity" {
			io.WriteString(w, `{"agent":"builder","seq":4,"focus":"the goal"}`)
			return
		}
		io.WriteString(w, `{"seq":5}`)
	})
	c := New(sock)
	defer c.Close()
	r, err := c.Resume(context.Background(), true)
	if err != nil || r.Agent != "builder" || r.Seq != 4 || r.Focus != "the goal" {
		t.Fatalf("resume %+v, %v", r, err)
	}
	f := 0.5
	if err := c.Signal(context.Background(), &capsule.Signal{Kind: "context", UsedFraction: &f}); err != nil {
		t.Fatal(err)
	}
	g := got()
	if len(g) != 2 || g[0].Query != "peek=1" || g[1].Method != "POST" || g[1].Path != "/v1/signals" || !strings.Contains(g[1].Body, `"used_fraction":0.5`) {
		t.Errorf("server saw %+v", g)
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

// Nobody at the socket: ErrUnreachable, naming the socket.
func TestDoUnreachable(t *testing.T) {
	dir := t.TempDir()
	for name, sock := range map[string]string{"missing": filepath.Join(dir, "none.sock"), "not a socket": dir} {
		c := New(sock)
		_, err := c.Do(context.Background(), http.MethodGet, "/healthz", nil, nil)
		if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), sock) {
			t.Errorf("%s: %v, want ErrUnreachable naming %s", name, err, sock)
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
	if _, err := c.Do(context.Background(), http.MethodGet, "/healthz", nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("a dead socket: %v, want ErrUnreachable", err)
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

// A call's budget: DefaultTimeout, plus what the call waits by design.
func TestTimeoutBudget(t *testing.T) {
	c := New("unused")
	for _, tc := range []struct {
		path string
		q    url.Values
		want time.Duration
	}{
		{"/v1/status", nil, DefaultTimeout},
		{"/v1/continuity/checkpoint", url.Values{}, DefaultTimeout},
		{"/v1/continuity/checkpoint", url.Values{"sync": {"1"}}, DefaultTimeout + syncWait},
		{"/v1/continuity/wait", url.Values{}, DefaultTimeout + waitDefault},
		{"/v1/continuity/wait", url.Values{"max_seconds": {"90"}}, DefaultTimeout + 90*time.Second},
		{"/v1/continuity/wait", url.Values{"max_seconds": {"junk"}}, DefaultTimeout + waitDefault},
		{"/v1/continuity/wait", url.Values{"max_seconds": {"99999"}}, DefaultTimeout + time.Hour},
	} {
		if got := c.timeout(tc.path, tc.q); got != tc.want {
			t.Errorf("%s?%s: %v, want %v", tc.path, tc.q.Encode(), got, tc.want)
		}
	}
	c.Timeout = time.Second
	if got := c.timeout("/v1/continuity/wait", url.Values{"max_seconds": {"5"}}); got != 6*time.Second {
		t.Errorf("Timeout 1s, wait 5 s: %v", got)
	}
}
