package api

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// mcpMaxBody bounds an /mcp request body: one MCP message.
const mcpMaxBody = mcpserver.MaxMessageBytes

// mcpLongestCall is the longest an MCP tool call runs by design:
// wait_for_event's longest poll.
const mcpLongestCall = agent.WaitMax * time.Second

// mcpServer is the MCP server of a session r opens (on /mcp, or on stdio
// handed over): its tools' calls are served by api in process, as from
// the socket's peer that opened it (none: the loopback listener's token
// holder), and ?agent= is their default agent.
func (a *API) mcpServer(api http.Handler, r *http.Request) *mcp.Server {
	c := InProcess(api, r.Context())
	c.Timeout = mcpLongestCall
	return mcpserver.New(mcpserver.Options{Client: c, Agent: r.URL.Query().Get("agent"),
		Version: a.o.Version, ResumeLimit: statefiles.ResumeMarkdownLimit})
}

// mcpHandler serves MCP (Streamable HTTP) at /mcp with the same tools as
// `continuityd mcp`. A tool's call is its operation's request, served by
// api, the API's own handler, in process, as from the session's caller
// (mcpServer): the same checks and codes as over HTTP. ?agent= picks the
// default agent for the session's tools.
//
// Sessions expire: one with no request for daemon.mcp_session_idle is
// closed by the SDK (its client gets 404 and starts a new one), and at most
// daemon.mcp_max_sessions are open at once. A new session at the limit
// takes the place of the least recently used idle one, which is closed (its
// client gets 404 and starts again): sessions a client abandoned (a restart
// loop, a script) cannot lock the user's own agent out. A session with a
// tool call in progress (a long wait_for_event) is not idle; only when
// every session has one is a new one refused with 503 MCP_SESSIONS_FULL.
// Errors of the transport itself are in the API's JSON shape too.
func (a *API) mcpHandler(api http.Handler) http.Handler {
	maxSessions, idle := a.o.MCPMaxSessions, a.o.MCPSessionIdle
	if maxSessions <= 0 {
		maxSessions = config.DefaultMCPMaxSessions
	}
	if idle <= 0 {
		idle = config.DefaultMCPSessionIdle
	}
	newServer := func(r *http.Request) *mcp.Server {
		return a.mcpServer(api, r)
	}
	// The SDK asks for a server on every request, but only connects the one
	// it gets for a new session; the others are consulted for their
	// protocol versions alone, so one shared server answers those.
	probe := newServer(&http.Request{URL: &url.URL{}})
	sessions := newMCPSessions(maxSessions, idle, a.o.MCPSessions, a.o.MCPEvicted)
	if a.o.Stopping != nil {
		context.AfterFunc(a.o.Stopping, sessions.closeAll)
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if s, ok := r.Context().Value(mcpServerKey{}).(*mcp.Server); ok {
			return s
		}
		return probe
	}, &mcp.StreamableHTTPOptions{JSONResponse: true, Logger: a.log, SessionTimeout: idle, MaxRequestBodyBytes: mcpMaxBody})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := mcpOriginRefusal(r); err != nil {
			writeError(w, err)
			return
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxBody))
			if err != nil {
				writeError(w, bodyRefusal(err, mcpMaxBody))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		switch r.Method {
		case http.MethodGet:
			// The standalone stream lasts as long as its session, which
			// closes after mcp_session_idle.
			ExtendWriteDeadline(r, 0)
		case http.MethodPost:
			ExtendWriteDeadline(r, mcpLongestCall+writeMargin)
		}
		ew := &mcpErrorWriter{ResponseWriter: w, idle: idle}
		defer ew.finish()
		owner := ownerOf(peerOf(r.Context()))
		if id := r.Header.Get("Mcp-Session-Id"); id != "" || r.Method != http.MethodPost {
			// A POST is a call: its session is busy until it ends. A GET
			// (the standalone stream, open for as long as the session) or
			// a DELETE only counts as a use.
			done, ours := sessions.use(id, owner, r.Method == http.MethodPost)
			defer done()
			if !ours {
				// Another user's session: asked as a session that does not
				// exist, it gets the very answer an unknown id gets.
				r = r.Clone(r.Context())
				r.Header.Set("Mcp-Session-Id", noSuchSession)
			}
			h.ServeHTTP(ew, r)
			return
		}
		// No session id: this request opens a session.
		evicted, ok := sessions.reserve(owner)
		closeSessions(evicted) // outside the lock: a close may wait for the session's goroutines
		if !ok {
			w.Header().Set("Retry-After", "60")
			writeError(w, capsule.Refuse(capsule.CodeMCPSessionsFull, "",
				"%d MCP sessions are open, the most daemon.mcp_max_sessions allows (%d for one user), and each has a tool call in progress "+
					"(an idle one would have given way to this one): retry later", sessions.max, sessions.perOwner))
			return
		}
		srv := newServer(r)
		sessions.opening(srv, owner)
		defer sessions.settle(srv)
		h.ServeHTTP(ew, r.WithContext(context.WithValue(r.Context(), mcpServerKey{}, srv)))
	})
}

// noSuchSession is a session id no session ever has (the SDK makes ids of
// letters and digits): what a request for another user's session is
// asked as.
const noSuchSession = "no such session"

// ownerOf is whom a session opened by p belongs to: the socket peer's
// user ("uid:N"), the loopback listener's token holder ("token"), or, for
// a peer whose credentials could not be read, "unknown" (such a peer is
// served no agent anyway).
func ownerOf(p *peer) string {
	switch {
	case p == nil:
		return "token"
	case p.err != nil:
		return "unknown"
	}
	return "uid:" + strconv.FormatUint(uint64(p.cred.UID), 10)
}

// trustedOwner reports whether owner is bounded by mcp_max_sessions alone:
// the token holder, root and the daemon's own user.
func trustedOwner(owner string) bool {
	return owner == "token" || owner == "uid:0" || owner == "uid:"+strconv.Itoa(os.Geteuid())
}

// mcpServerKey carries the server built for a new session to the SDK's
// getServer.
type mcpServerKey struct{}

// mcpSessions counts and owns /mcp's live sessions. Each session has its
// own server (its tools are bound to the session's ?agent=), so a server
// with a connected session is a live one. The SDK closes a session (idle
// timeout, DELETE) without telling anyone, so closed ones are swept: by a
// timer every sweepEvery while any are live (no goroutine waits between
// sweeps, none per session), and at once when the limit is reached. At the
// limit the least recently used session with no call in progress is closed
// to make room (the SDK lets a server end any session; its client gets 404
// and initializes again).
//
// A session belongs to the user who opened it (ownerOf): a request from
// another user naming its id is answered as for an unknown session, so
// that a session id seen elsewhere (a log, a process list) lends nobody
// the opener's agents. One user other than root and the daemon's own
// holds at most perOwner sessions: at that bound its own least recently
// used idle session gives way, never another user's.
type mcpSessions struct {
	max, perOwner int
	sweepEvery    time.Duration
	gauge         *prometheus.GaugeVec // state: idle, in_call; nil: not measured
	evictions     prometheus.Counter   // nil: not counted

	mu      sync.Mutex
	live    map[string]*mcpSession // by session id
	idle    *list.List             // the live sessions with no call in progress, most recently used first
	pending int                    // sessions being opened
	// opened are the servers of sessions being opened, by owner: their
	// session has an id (and its client may use it) before settle.
	opened map[*mcp.Server]string
	owners map[string]int // sessions live or being opened, by owner
	sweep  *time.Timer    // armed while live is not empty
	closed bool           // the daemon is stopping
}

// mcpSession is one live session: its server, whose it is, and how many
// of its calls are in progress; while there are none it is in
// mcpSessions.idle.
type mcpSession struct {
	id    string
	owner string
	srv   *mcp.Server
	calls int
	idle  *list.Element // nil while a call is in progress
}

// mcpOriginRefusal is why an MCP request (/mcp, /mcp/stdio) is refused for
// its Origin (nil: none, or an acceptable one). A web page must not drive
// the agent's tools: browsers send Origin, MCP clients do not (or send
// their own single-label host). On the loopback listener requireToken has
// already held Host and Origin to loopback; this is the Unix socket's rule.
func mcpOriginRefusal(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !socketOrigin(o, r.Host) {
		return capsule.Refuse(capsule.CodeForbiddenOrigin, "",
			"MCP requests from a page on another origin (%s) are refused", o)
	}
	return nil
}

func newMCPSessions(max int, idle time.Duration, gauge *prometheus.GaugeVec, evictions prometheus.Counter) *mcpSessions {
	perOwner := max / 4
	if perOwner < 1 {
		perOwner = 1
	}
	return &mcpSessions{max: max, perOwner: perOwner, sweepEvery: min(idle/2, time.Minute), gauge: gauge, evictions: evictions,
		live: map[string]*mcpSession{}, idle: list.New(), opened: map[*mcp.Server]string{}, owners: map[string]int{}}
}

// reserve takes a place for a session owner is about to open; false when
// full (for the owner, or in all) and every session that could give way
// has a call in progress. To make room it may take the place of the least
// recently used idle session (the owner's own, when the owner is at its
// bound): the caller closes evicted (nil when none was).
func (s *mcpSessions) reserve(owner string) (evicted *mcp.Server, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	bounded := !trustedOwner(owner)
	if len(s.live)+s.pending >= s.max || bounded && s.owners[owner] >= s.perOwner {
		s.sweepLocked()
	}
	var lru *mcpSession
	switch {
	case bounded && s.owners[owner] >= s.perOwner:
		for e := s.idle.Back(); e != nil && lru == nil; e = e.Prev() {
			if ss := e.Value.(*mcpSession); ss.owner == owner {
				lru = ss
			}
		}
		if lru == nil {
			return nil, false
		}
	case len(s.live)+s.pending >= s.max:
		e := s.idle.Back()
		if e == nil {
			return nil, false
		}
		lru = e.Value.(*mcpSession)
	}
	if lru != nil {
		s.forgetLocked(lru)
		evicted = lru.srv
		if s.evictions != nil {
			s.evictions.Inc()
		}
	}
	s.pending++
	s.owners[owner]++
	return evicted, true
}

// opening records srv as the server of the session owner is opening (after
// reserve): until settle, use finds its session by the id it got.
func (s *mcpSessions) opening(srv *mcp.Server, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened[srv] = owner
}

// settle gives back the place reserve took; srv's session keeps one while
// it is open.
func (s *mcpSessions) settle(srv *mcp.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	owner := s.opened[srv]
	delete(s.opened, srv)
	id := sessionID(srv)
	if id == "" {
		s.ownerGoneLocked(owner)
		return
	}
	if s.closed {
		closeSessions(srv)
		return
	}
	ss := &mcpSession{id: id, owner: owner, srv: srv}
	ss.idle = s.idle.PushFront(ss)
	s.live[id] = ss
	s.measureLocked()
	if s.sweep == nil {
		s.sweep = time.AfterFunc(s.sweepEvery, s.sweepTimer)
	}
}

// ownerGoneLocked counts one of owner's sessions out.
func (s *mcpSessions) ownerGoneLocked(owner string) {
	if s.owners[owner]--; s.owners[owner] <= 0 {
		delete(s.owners, owner)
	}
}

// use marks session id used now by owner and, for a call, busy until the
// returned func is called; ours is false when the session is another
// owner's (it is then neither used nor busy). An id that is not live
// (closed, or made up) is left to the SDK, which answers 404.
func (s *mcpSessions) use(id, owner string, call bool) (done func(), ours bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.live[id]
	if ss == nil {
		for srv, o := range s.opened { // opened, not settled yet
			if o != owner && id != "" && sessionID(srv) == id {
				return func() {}, false
			}
		}
		return func() {}, true
	}
	if ss.owner != owner {
		return func() {}, false
	}
	if ss.idle != nil {
		s.idle.MoveToFront(ss.idle)
	}
	if !call {
		return func() {}, true
	}
	if ss.idle != nil {
		s.idle.Remove(ss.idle)
		ss.idle = nil
	}
	ss.calls++
	s.measureLocked()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ss.calls--
		if ss.calls == 0 && s.live[ss.id] == ss {
			ss.idle = s.idle.PushFront(ss)
			s.measureLocked()
		}
	}, true
}

func (s *mcpSessions) sweepTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.sweepLocked()
	if len(s.live) > 0 {
		s.sweep.Reset(s.sweepEvery)
	} else {
		s.sweep = nil
	}
}

// sweepLocked forgets the sessions that have closed.
func (s *mcpSessions) sweepLocked() {
	for _, ss := range s.live {
		if !hasSession(ss.srv) {
			s.forgetLocked(ss)
		}
	}
}

// forgetLocked drops ss from the live sessions.
func (s *mcpSessions) forgetLocked(ss *mcpSession) {
	delete(s.live, ss.id)
	s.ownerGoneLocked(ss.owner)
	if ss.idle != nil {
		s.idle.Remove(ss.idle)
		ss.idle = nil
	}
	s.measureLocked()
}

// measureLocked sets the gauge of live sessions, idle and in a call.
func (s *mcpSessions) measureLocked() {
	if s.gauge == nil {
		return
	}
	s.gauge.WithLabelValues("idle").Set(float64(s.idle.Len()))
	s.gauge.WithLabelValues("in_call").Set(float64(len(s.live) - s.idle.Len()))
}

// closeAll closes every session: the daemon is stopping.
func (s *mcpSessions) closeAll() {
	s.mu.Lock()
	s.closed = true
	if s.sweep != nil {
		s.sweep.Stop()
	}
	live := s.live
	s.live = nil
	s.mu.Unlock()
	for _, ss := range live {
		closeSessions(ss.srv)
	}
}

func hasSession(srv *mcp.Server) bool { return sessionID(srv) != "" }

// sessionID is the id of srv's session ("" when it has none: it closed, or
// never opened). Each server serves one session.
func sessionID(srv *mcp.Server) string {
	for ss := range srv.Sessions() {
		return ss.ID()
	}
	return ""
}

// closeSessions closes srv's sessions; srv may be nil.
func closeSessions(srv *mcp.Server) {
	if srv == nil {
		return
	}
	for ss := range srv.Sessions() {
		ss.Close()
	}
}

// mcpErrorWriter turns the SDK's plain-text HTTP errors into the API's JSON
// error shape; JSON-RPC answers (errors included) pass through unchanged.
type mcpErrorWriter struct {
	http.ResponseWriter
	idle   time.Duration
	status int // a plain-text error held back; 0: passing through
	text   bytes.Buffer
}

func (e *mcpErrorWriter) WriteHeader(status int) {
	if status >= 400 && e.status == 0 && strings.HasPrefix(e.Header().Get("Content-Type"), "text/plain") {
		e.status = status
		return
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *mcpErrorWriter) Write(p []byte) (int, error) {
	if e.status != 0 {
		if e.text.Len() < 1024 {
			e.text.Write(p[:min(len(p), 1024)])
		}
		return len(p), nil
	}
	return e.ResponseWriter.Write(p)
}

func (e *mcpErrorWriter) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok && e.status == 0 {
		f.Flush()
	}
}

func (e *mcpErrorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// finish writes the held-back error, if any, in the API's shape.
func (e *mcpErrorWriter) finish() {
	if e.status == 0 {
		return
	}
	msg := strings.TrimSpace(e.text.String())
	code := capsule.CodeInvalidMCPRequest
	switch e.status {
	case http.StatusNotFound:
		code = capsule.CodeNotFound
		if msg == "session not found" || msg == "session is closing" {
			msg = "no such MCP session: it was closed, or expired after " + e.idle.String() +
				" without a request; start a new one with initialize"
		}
	case http.StatusMethodNotAllowed:
		code = capsule.CodeMethodNotAllowed
	case http.StatusForbidden:
		code = capsule.CodeForbiddenOrigin
	case http.StatusUnsupportedMediaType:
		code = capsule.CodeUnsupportedMedia
	case http.StatusRequestEntityTooLarge:
		code = capsule.CodeBodyTooLarge
	case http.StatusInternalServerError:
		code = capsule.CodeInternal
	}
	h := e.Header()
	h.Del("X-Content-Type-Options")
	writeError(e.ResponseWriter, capsule.Refuse(code, "", "MCP: %s", msg))
}
