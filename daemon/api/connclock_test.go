package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
	"go.uber.org/goleak"
)

// clockLimit is every timeout of the servers these tests start: short, so
// the tests are, and a tick of 50 ms.
const clockLimit = 300 * time.Millisecond

// clockServer serves h on a Unix socket under NewServer with to, and
// returns the socket; the server and its clock stop with the test, and no
// goroutine of theirs is left.
func clockServer(t *testing.T, to Timeouts, h http.HandlerFunc) string {
	sock, _ := clockServerOf(t, to, 0, h)
	return sock
}

// clockServerOf is clockServer that gives the clock too, looking at its
// connections every tick (0: the clock's own).
func clockServerOf(t *testing.T, to Timeouts, tick time.Duration, h http.HandlerFunc) (string, *connClock) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, context.Background(), slog.New(slog.DiscardHandler), to)
	if tick > 0 {
		srv.clock.tick = tick
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock, srv.clock
}

// pastLimit waits until limit has passed since from and the clock has
// looked at its connections twice since (so a limit that passed has been
// acted on, however slow the machine), with a generous deadline.
func pastLimit(t *testing.T, k *connClock, from time.Time, limit time.Duration) {
	t.Helper()
	var seen uint64
	testwait.Until(t, func() string { return fmt.Sprintf("the limit passed, and then %d looks", k.passes.Load()-seen) }, func() bool {
		if seen == 0 {
			if time.Since(from) <= limit {
				return false
			}
			seen = k.passes.Load() + 1 // +1: never 0 once set
		}
		return k.passes.Load() >= seen+1
	})
}

func dialClock(t *testing.T, sock string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin waits (at most a generous 10 s) for the server to close c,
// and says how long that took.
func closedWithin(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the connection was not closed by the server within 10 s (read %d bytes, then %v)", n, err)
	}
	return took
}

var clockTimeouts = Timeouts{Read: clockLimit, Idle: clockLimit, Write: clockLimit}

func okHandler(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }

// A connection that never sends its request's head is closed at the read
// limit, not before.
func TestClockClosesASilentConnection(t *testing.T) {
	c := dialClock(t, clockServer(t, clockTimeouts, okHandler))
	if took := closedWithin(t, c); took < clockLimit {
		t.Fatalf("closed after %v, before the read limit of %v", took, clockLimit)
	}
}

// A head trickled and left unfinished is cut at the read limit.
func TestClockClosesATrickledHead(t *testing.T) {
	c := dialClock(t, clockServer(t, clockTimeouts, okHandler))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	if took := closedWithin(t, c); took < clockLimit {
		t.Fatalf("closed after %v, before the read limit of %v", took, clockLimit)
	}
}

// A keep-alive connection is closed once it has waited for the idle limit
// since its last answer, not before: each request starts the wait again.
// The test moves the clock's time itself (its own looks are an hour apart),
// so no wait of the machine's decides the outcome.
func TestClockClosesAnIdleKeepAlive(t *testing.T) {
	const idle = time.Minute
	sock, clock := clockServerOf(t, Timeouts{Read: idle, Idle: idle, Write: idle}, time.Hour, okHandler)
	c := dialClock(t, sock)
	br := bufio.NewReader(c)
	get := func() {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a request on a connection in use was refused: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("answer %q", b)
		}
	}
	// idleUntil waits until the server has finished the answer and returns
	// when the connection's idle wait ends.
	idleUntil := func() time.Time {
		t.Helper()
		var by time.Time
		testwait.Until(t, func() string { return "the connection to wait idle" }, func() bool {
			clock.mu.Lock()
			defer clock.mu.Unlock()
			for cc := range clock.conns {
				cc.mu.Lock()
				defer cc.mu.Unlock()
				if cc.phase.Load() == phaseIdle {
					by = cc.readBy
					return true
				}
			}
			return false
		})
		return by
	}
	sent := time.Now()
	get()
	first := idleUntil()
	if first.Before(sent.Add(idle)) {
		t.Fatalf("the idle wait ends %v after the request was sent, short of the idle limit of %v", first.Sub(sent), idle)
	}
	get()
	second := idleUntil()
	if !second.After(first) {
		t.Fatalf("the second answer's idle wait ends %v, not after the first's %v", second, first)
	}
	clock.expire(first.Add(second.Sub(first) / 2)) // past the first wait, within the second
	get()
	clock.expire(idleUntil().Add(time.Nanosecond))
	closedWithin(t, c)
}

// A body that stops arriving fails its read at the read limit with
// bodyTooSlow, and the handler's answer still reaches the client.
func TestClockCutsASlowBody(t *testing.T) {
	sock := clockServer(t, Timeouts{Read: clockLimit, Idle: clockLimit, Write: 20 * clockLimit}, func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		var slow *bodyTooSlow
		if !errors.As(err, &slow) {
			http.Error(w, fmt.Sprintf("body read: %v", err), http.StatusBadRequest)
			return
		}
		http.Error(w, fmt.Sprintf("too slow: the body had %v", slow.limit), http.StatusRequestTimeout)
	})
	c := dialClock(t, sock)
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "too slow: the body had 300ms") {
		t.Fatalf("answer %d %q, want 408 naming the limit", resp.StatusCode, b)
	}
}

// Once its body is in, a request may run past the read limit: the body's
// limit is lifted, so the request's context is not cancelled by it.
func TestClockLiftsTheBodyLimitOnceTheBodyIsIn(t *testing.T) {
	bodyIn, release := make(chan time.Time, 1), make(chan struct{})
	sock, clock := clockServerOf(t, Timeouts{Read: clockLimit, Idle: clockLimit, Write: time.Minute}, 0, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		bodyIn <- time.Now()
		<-release
		if err := r.Context().Err(); err != nil {
			http.Error(w, "context: "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "got %s", b)
	})
	go func() {
		pastLimit(t, clock, <-bodyIn, clockLimit)
		close(release)
	}()
	resp, err := clockClient(sock).Post("http://x/", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != "got body" {
		t.Fatalf("answer %d %q", resp.StatusCode, b)
	}
}

// An ordinary answer that is not out by the write limit fails; a call
// that is long by design extends its limit and is answered.
func TestClockWriteLimit(t *testing.T) {
	started, release := make(chan time.Time, 2), make(chan struct{})
	sock, clock := clockServerOf(t, clockTimeouts, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/long" {
			ExtendWriteDeadline(r, time.Minute)
		}
		started <- time.Now()
		<-release
		io.WriteString(w, "late")
	})
	c := clockClient(sock)
	type answer struct {
		body string
		err  error
	}
	get := func(path string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, err := c.Get("http://x" + path)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			ch <- answer{string(b), err}
		}()
		return ch
	}
	short, long := get("/"), get("/long")
	later := <-started
	if t2 := <-started; t2.After(later) {
		later = t2
	}
	pastLimit(t, clock, later, clockLimit)
	close(release)
	if a := <-long; a.err != nil || a.body != "late" {
		t.Errorf("the long call: %q, %v; want its answer", a.body, a.err)
	}
	if a := <-short; a.err == nil && a.body == "late" {
		t.Errorf("the ordinary call was answered %v after its write limit of %v", 4*clockLimit, clockLimit)
	}
}

func clockClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}
