package api

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/continuityd/continuityd/config"
)

// Timeouts are the local API's connection timeouts (daemon.read_timeout,
// daemon.idle_timeout, daemon.write_timeout; a zero one takes its default
// from package config). Every client is on this machine (the Unix socket,
// or the loopback listener), so a well-behaved one sends a whole request,
// at most 64 KiB, in well under a millisecond; these bound what a stuck or
// hostile one can hold.
//
//   - Read: the request line and headers; then, again, the body, counted
//     from the moment the handler starts.
//     A body trickled a byte at a time is cut when it runs out and the
//     connection is closed. The body's limit is lifted once the body has
//     been read to its end: a limit left on the connection would fail
//     net/http's background read and cancel the request's context, which
//     would cut every long poll (and a ?sync=1 checkpoint) at it.
//   - Idle: a keep-alive connection waiting for its next request.
//     The CLI's client keeps idle connections 30 s; hooks are short-lived.
//   - Write: the whole answer of an ordinary request, counted from
//     the end of its headers. The calls that are long by design raise it
//     for themselves (ExtendWriteDeadline): the long poll to its
//     max_seconds (at most 90) plus writeMargin, an MCP POST to the longest
//     tool call (wait_for_event), and MCP's standalone GET stream has none,
//     since it ends when its session does (after mcp_session_idle).
//
// net/http's own timeouts are left unset: a connClock keeps these (see
// there why).
type Timeouts struct {
	Read, Idle, Write time.Duration
}

// orDefaults is t with each zero timeout at its default.
func (t Timeouts) orDefaults() Timeouts {
	return Timeouts{Read: cmp.Or(t.Read, config.DefaultReadTimeout),
		Idle: cmp.Or(t.Idle, config.DefaultIdleTimeout), Write: cmp.Or(t.Write, config.DefaultWriteTimeout)}
}

const (
	// writeMargin is what a long call's answer gets past its own length.
	writeMargin = 15 * time.Second
	// maxHeaderBytes bounds a request's line and headers: this API's
	// carry a token and a few short fields, and Go's default (1 MiB)
	// would let each connection hold a megabyte before authentication.
	maxHeaderBytes = 16 << 10
)

// Server is the http.Server of one listener, with its connections'
// timeouts kept by a connClock (see Timeouts) rather than by net/http.
type Server struct {
	*http.Server
	clock *connClock
}

// NewServer is the server for one listener, with the timeouts to; requests'
// contexts come from base, which ends when shutdown begins.
func NewServer(h http.Handler, base context.Context, log *slog.Logger, to Timeouts) *Server {
	to = to.orDefaults()
	clock := newConnClock(to)
	return &Server{Server: &http.Server{
		Handler:        withBodyDeadline(h, to.Read),
		MaxHeaderBytes: maxHeaderBytes,
		ConnState:      clock.connState,
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}, clock: clock}
}

// Serve serves l's connections, each under the clock, until Shutdown or
// Close; the clock's goroutine ends with it. A ConnContext set before
// Serve is kept.
func (s *Server) Serve(l net.Listener) error {
	connCtx := s.ConnContext
	s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connCtx != nil {
			ctx = connCtx(ctx, c)
		}
		if cc, ok := c.(*clockedConn); ok {
			ctx = context.WithValue(ctx, clockKey{}, cc)
		}
		return ctx
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s.clock.run(stop)
	}()
	defer func() {
		close(stop)
		<-stopped
	}()
	return s.Server.Serve(&clockListener{Listener: l, clock: s.clock})
}

// withBodyDeadline gives a request's body limit to arrive (see above).
func withBodyDeadline(h http.Handler, limit time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			if c := connOf(r.Context()); c != nil {
				c.bodyBy(time.Now().Add(limit))
				r.Body = &deadlineBody{ReadCloser: r.Body, c: c, limit: limit}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the body's limit once the body has been read to its
// end, so the rest of the request (a long poll, a sync checkpoint) is not
// cut by it.
type deadlineBody struct {
	io.ReadCloser
	c     *clockedConn
	limit time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.c.bodyIn()
	} else if isTimeout(err) {
		err = &bodyTooSlow{err: err, limit: b.limit}
	}
	return n, err
}

// bodyTooSlow is a body's read deadline passing; it says how long the body
// had, for the refusal's message.
type bodyTooSlow struct {
	err   error
	limit time.Duration
}

func (e *bodyTooSlow) Error() string { return e.err.Error() }
func (e *bodyTooSlow) Unwrap() error { return e.err }

// ExtendWriteDeadline gives the answer to r d more from now (0: no limit),
// for the calls that are long by design (a long poll, an MCP stream, the
// page's live stream). It is a no-op for a request that came on no
// connection (the in-process calls of /mcp's tools and of the page).
func ExtendWriteDeadline(r *http.Request, d time.Duration) {
	if c := connOf(r.Context()); c != nil {
		c.answerWithin(d)
	}
}

// isTimeout reports whether err is a deadline passing (a body too slow).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
