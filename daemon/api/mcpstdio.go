package api

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/ops"
)

// stdioSessions counts the live MCP sessions on stdio that `continuityd
// mcp` handed to the daemon (GET /mcp/stdio). They are counted beside
// /mcp's sessions, with the same bound (daemon.mcp_max_sessions): a stdio
// session is a client's process that is still running, so, unlike an idle
// /mcp session, none is ever closed to make room for another; at the bound
// a new one is refused (503 MCP_SESSIONS_FULL) and the front serves its
// client itself.
type stdioSessions struct {
	max   int
	gauge *prometheus.GaugeVec // state stdio; nil: not measured

	mu   sync.Mutex
	live int
	// none is closed while live is 0 (open makes a new one): what wait
	// waits for.
	none chan struct{}
}

func newStdioSessions(max int, gauge *prometheus.GaugeVec) *stdioSessions {
	if max <= 0 {
		max = config.DefaultMCPMaxSessions
	}
	none := make(chan struct{})
	close(none)
	return &stdioSessions{max: max, gauge: gauge, none: none}
}

// open takes a place for a session; false at the bound.
func (s *stdioSessions) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live >= s.max {
		return false
	}
	if s.live == 0 {
		s.none = make(chan struct{})
	}
	s.live++
	s.measureLocked()
	return true
}

// close gives back the place open took.
func (s *stdioSessions) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if s.live == 0 {
		close(s.none)
	}
	s.measureLocked()
}

// wait waits until no session is open, or ctx ends (its error). A session
// is counted out once its MCP server has returned, its tool calls with it.
func (s *stdioSessions) wait(ctx context.Context) error {
	s.mu.Lock()
	none := s.none
	s.mu.Unlock()
	select {
	case <-none: // first, even when ctx has ended too
		return nil
	default:
	}
	select {
	case <-none:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitStdioSessions waits, until ctx ends, for the MCP sessions on stdio
// to end; they end when the requests' context or Options.Stopping does.
// The daemon calls it after its servers' Shutdown, which does not wait for
// a connection taken over (a session's tool call could otherwise still
// run on an agent the daemon is closing). By then every session that will
// be served is counted: one is counted before its connection is taken.
func (a *API) WaitStdioSessions(ctx context.Context) error { return a.stdio.wait(ctx) }

func (s *stdioSessions) measureLocked() {
	if s.gauge != nil {
		s.gauge.WithLabelValues("stdio").Set(float64(s.live))
	}
}

// mcpStdioRefusal is why GET /mcp/stdio cannot be taken as asked (nil: it
// can): an Origin from a page, a listener other than the Unix socket, a
// request that does not ask for the upgrade.
func mcpStdioRefusal(r *http.Request) error {
	if err := mcpOriginRefusal(r); err != nil {
		return err
	}
	if peerOf(r.Context()) == nil {
		return capsule.Refuse(capsule.CodeNotFound, "",
			"%s is served on the daemon's Unix socket only (descriptors pass over nothing else); here use /mcp", r.URL.Path)
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), ops.MCPStdioUpgrade) {
		return capsule.Refuse(capsule.CodeInvalidMCPRequest, "",
			"%s takes over the connection: ask with Connection: Upgrade and Upgrade: %s (continuityd mcp does)", r.URL.Path, ops.MCPStdioUpgrade)
	}
	return nil
}

// headerHasToken reports whether header name lists token (a
// comma-separated list, any case).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
