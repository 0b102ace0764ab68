package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/daemon/api"
)

// Options configures the page.
type Options struct {
	// API is the local API's routes (api.Handler): the page calls the
	// operations there, in process, as its session's user (api.AsUser),
	// with the same checks as on the socket.
	API    http.Handler
	Logger *slog.Logger
	// SessionTTL is how long a session lives (0: SessionTTL).
	SessionTTL time.Duration
	// History is where a file's versions come from (nil: the version
	// journal, or its versions across the snapshots where the place
	// keeps no journal).
	History History
	// Timeouts are the connection timeouts of the listener the page opens
	// itself.
	Timeouts api.Timeouts
	// StaticFile, when set, is served as it is at /ui/static (behind the
	// door): the benchmarks' reference, a static page of a view's size.
	StaticFile string
	// OwnListenerAddr is where the page's own listener is opened when no
	// loopback listener is configured ("": 127.0.0.1 on a port the kernel
	// picks).
	OwnListenerAddr string
}

// Server is the page. It is served either on the configured loopback
// listener (the daemon routes /ui/ there to Handler) or, without one, on
// a listener of its own, opened on 127.0.0.1 when a login URL is first
// asked for.
type Server struct {
	o        Options
	log      *slog.Logger
	sessions *sessions
	history  History
	streams  atomic.Int32 // live streams open
	lists    listCache    // the places' snapshot lists
	rests    restCache    // the diffs the changes view just parsed

	// stop ends the page's own listener's requests (its live streams)
	// when it shuts down.
	stopCtx context.Context
	stop    context.CancelFunc

	mu     sync.Mutex
	base   string // http://127.0.0.1:PORT, once a listener serves the page
	own    *api.Server
	served chan struct{} // closed when the own server's Serve returned
	closed bool
}

// New returns the page.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, log: o.Logger, sessions: newSessions(o.SessionTTL)}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.history = o.History
	if s.history == nil {
		s.history = journalHistory{s}
	}
	return s
}

// Handler is the page behind its door, for a listener on port.
func (s *Server) Handler(port string) http.Handler {
	return s.door(port, s.routes())
}

// UseListener says the configured loopback listener at addr serves the
// page (the daemon routes /ui/ there to Handler): login URLs name it.
func (s *Server) UseListener(addr net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = baseURL(addr)
}

func baseURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = "[" + host + "]"
	}
	return "http://" + host + ":" + port
}

// Listening is the page's address ("" until a listener serves it), and
// whether it is the page's own listener.
func (s *Server) Listening() (base string, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base, s.own != nil
}

// ErrClosed is Login's answer once the daemon is stopping.
var ErrClosed = errors.New("the web page is closed: the daemon is stopping")

// Login makes a one-time login URL for uid (primary group gid), opening
// the page's own listener first when none serves the page yet; own says
// it is the page's own.
func (s *Server) Login(uid, gid uint32) (url string, own bool, err error) {
	base, err := s.listening()
	if err != nil {
		return "", false, err
	}
	s.mu.Lock()
	own = s.own != nil
	s.mu.Unlock()
	return base + "/ui/login?t=" + s.sessions.newTicket(Identity{UID: uid, GID: gid}), own, nil
}

var _ api.UI = (*Server)(nil)

// Revoke ends the sessions (and unused login URLs) of uid, or every one
// with all; it says how many sessions ended.
func (s *Server) Revoke(uid uint32, all bool) int {
	n := s.sessions.revoke(uid, all)
	s.log.Info("web page sessions revoked", "uid", uid, "all", all, "sessions", n)
	return n
}

// listening is the page's base URL, opening its own listener when none
// serves it yet.
func (s *Server) listening() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	if s.base != "" {
		return s.base, nil
	}
	addr := s.o.OwnListenerAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("the web page's loopback listener %s: %w", addr, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := api.NewServer(s.Handler(port), s.stopCtx, s.log, s.o.Timeouts)
	srv.ConnContext = ConnContext
	s.own, s.base, s.served = srv, baseURL(ln.Addr()), make(chan struct{})
	go func() {
		defer close(s.served)
		if err := srv.Serve(api.LimitListener(ln, maxConnections)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the web page's listener failed", "err", err)
		}
	}()
	s.log.Info("web page listening", "url", s.base+"/ui/")
	return s.base, nil
}

// maxConnections bounds the page's own listener's connections: a browser
// opens a handful.
const maxConnections = 64

// Shutdown stops the page's own listener (its live streams end at once)
// and refuses logins from then on; sessions end with the daemon.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	srv, served := s.own, s.served
	s.mu.Unlock()
	s.stop()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	<-served
	return err
}
