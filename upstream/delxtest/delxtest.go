// Package delxtest is an in-process fake of the Delx MCP endpoint for tests:
// an MCP server built with the official Go SDK (mcp.NewServer, three tools,
// mcp.NewStreamableHTTPHandler) on an httptest.Server bound to 127.0.0.1,
// in front of which a plain HTTP layer enforces Delx's documented rules and
// plays a scripted list of faults.
//
// POST /api/v1/agents/register (RegistrationPath) is Delx's registration:
// {"agent_id","registration_key","source"}, all required, no other field;
// the key must be Options.RegistrationKey (else 401). It answers the
// identity: agent_id, identity_auth.token (new, random) and session_id (a
// new session, owned by the agent). Registering an agent_id again issues a
// new token (the old one stops working) and a new session. It counts
// against the rate limit of the caller's address.
//
// Per HTTP request to the MCP endpoint (any other path), in this order:
//
//  1. the next scripted Fault, if it applies to this request (see Fault);
//  2. 406 unless Accept includes application/json (GET, the SSE stream,
//     is exempt);
//  3. 401 unless x-delx-agent-id / x-delx-agent-token match
//     Options.AgentTokens;
//  4. the rate limit, Options.Limit requests per Options.Window per agent
//     id, answered in Options.RateLimitStyle;
//  5. the MCP handler, whose tools validate like Delx: a bad argument, a
//     session_id that is not a session of the calling agent (issued by its
//     registration or given in Options.Sessions), an agent_id other than
//     the caller's, a capsule that fails the published schema, or a
//     credential-shaped value is a tool result with isError set (never an
//     HTTP status; structured content {"error":{"code","message"}}), with
//     an explanation that never repeats the value.
//
// Fleets (Options.Fleets, see fleets.go) are the one exception to "a
// capsule is private to its agent": an agent joins a fleet by presenting
// its invite token, and a member reads another member's capsule with
// resume_session {agent_id: the member, fleet_id}. The fake enforces it
// from its own records of who joined, never from what the client claims.
//
// Every tools/call is recorded as a Call, whatever became of it; every HTTP
// request as a Request.
package delxtest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/testkit/guardtest"
)

// Names Delx uses (the client package has its own copies).
const (
	HeaderAgentID        = "x-delx-agent-id"
	HeaderAgentToken     = "x-delx-agent-token"
	HeaderIdempotencyKey = "Idempotency-Key"
	MetaIdempotencyKey   = "idempotency_key"
	CodeRateLimited      = -32029

	ToolLeaveHiveNote = "leave_hive_note"
	ToolCloseSession  = "close_session"
	ToolResumeSession = "resume_session"

	RegistrationPath = "/api/v1/agents/register"
)

// Rate-limit styles.
const (
	// StyleHTTP answers HTTP 429 with Retry-After and x-ratelimit-* headers
	// and a small JSON body that is not JSON-RPC.
	StyleHTTP = "http"
	// StyleJSONRPC answers a call with HTTP 200 and a JSON-RPC error -32029
	// whose data has retry_after_seconds (no Retry-After header). A request
	// that is not a call (a notification, a DELETE) gets StyleHTTP's 429.
	StyleJSONRPC = "jsonrpc"
	// StyleBoth is what the Delx docs describe for MCP paths: HTTP 429 with
	// Retry-After and x-ratelimit-* headers, and a JSON-RPC error -32029
	// body with data.retry_after_seconds.
	StyleBoth = "both"
)

// Options configures the fake.
type Options struct {
	// AgentTokens maps agent_id to token; a request without matching
	// x-delx-agent-id / x-delx-agent-token headers gets HTTP 401.
	AgentTokens map[string]string
	// Sessions maps session_id to the agent_id that owns it, for agents
	// given in AgentTokens (registered ones get theirs from Register).
	Sessions map[string]string
	// RegistrationKey enables the registration endpoint: a registration
	// must carry this key. "" answers 404 there.
	RegistrationKey string
	// TLS serves https with a certificate of the server's own CA (see
	// Certificate), which no system trusts.
	TLS    bool
	Limit  int           // requests per Window per client (default 60)
	Window time.Duration // default 60s
	// RateLimitStyle is StyleHTTP (default), StyleJSONRPC or StyleBoth.
	RateLimitStyle string
	// Fleets maps a fleet_id to its invite token: an agent that presents
	// the token (invite_token beside fleet_id) joins the fleet.
	Fleets map[string]string
	// SkipMembershipCheck lets any caller read a fleet member's capsule:
	// only for the tests that prove a refusal comes from the fake's check.
	SkipMembershipCheck bool
}

// Call is one tools/call as the fake saw it.
type Call struct {
	At             time.Time
	Tool           string
	AgentID        string // from the x-delx-agent-id header
	SessionID      string // the session_id argument
	IdempotencyKey string // the Idempotency-Key header, else _meta.idempotency_key
	// MetaIdempotencyKey is _meta.idempotency_key as sent.
	MetaIdempotencyKey string
	// Capsule is the capsule argument as received, kept only when Result
	// is "ok" (a refused capsule is not kept, as Delx stores nothing).
	Capsule json.RawMessage
	// Result is ok, tool_error, http_401, http_406, rate_limited, or
	// fault:<what> for a scripted fault (fault:reset, fault:garbage,
	// fault:http_500, fault:rpc_-32029, fault:tool_error, fault:slow).
	Result string
	// Message is the tool error text, for tool_error.
	Message string
	// FleetID and InviteToken are the fleet_id and invite_token arguments.
	FleetID     string
	InviteToken string
	// Header is the HTTP request's header.
	Header http.Header
}

// Request is one HTTP request as the fake saw it.
type Request struct {
	At           time.Time
	Method       string // HTTP method
	URL          string // request URI as received
	RPCMethod    string // JSON-RPC method of a POST, if any
	MCPSessionID string // Mcp-Session-Id header
	AgentID      string
	Status       int // 0 when the connection was reset
}

// Registration is one call to the registration endpoint as the fake saw
// it (never the registration key).
type Registration struct {
	At        time.Time
	AgentID   string
	Source    string
	SessionID string // issued, when Result is "ok"
	Token     string // issued, when Result is "ok" (tests look for it in logs)
	// Result is ok, http_400, http_401, http_404, http_405 or rate_limited.
	Result string
}

// Server is the fake Delx endpoint.
type Server struct {
	opts    Options
	guard   *guard.Guard
	mcp     *mcp.Server
	handler *mcp.StreamableHTTPHandler
	ts      *httptest.Server

	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	faults   []Fault
	calls    []Call
	notes    []json.RawMessage
	latest   map[string]stored            // by agent id
	sessions map[string]string            // session_id → agent_id
	members  map[string]map[string]bool   // fleet_id → agent_ids that joined
	inFleet  map[string]map[string]stored // fleet_id → agent_id → its latest capsule there
	regs     []Registration
	requests []Request
	windows  map[string][]time.Time // rate-limit log per client
}

type stored struct {
	capsule   json.RawMessage
	sessionID string
	at        time.Time
}

// sharedGuard is the capsule guard the daemon runs, one per process.
func sharedGuard() *guard.Guard {
	g, err := guardtest.Shared()
	if err != nil {
		panic("delxtest: building the capsule guard: " + err.Error())
	}
	return g
}

// New starts a fake on 127.0.0.1. Close it when done.
func New(o Options) *Server {
	if o.Limit <= 0 {
		o.Limit = 60
	}
	if o.Window <= 0 {
		o.Window = 60 * time.Second
	}
	if o.RateLimitStyle == "" {
		o.RateLimitStyle = StyleHTTP
	}
	tokens := make(map[string]string, len(o.AgentTokens))
	for k, v := range o.AgentTokens {
		tokens[k] = v
	}
	o.AgentTokens = tokens
	fleets := make(map[string]string, len(o.Fleets))
	for k, v := range o.Fleets {
		fleets[k] = v
	}
	o.Fleets = fleets
	s := &Server{
		opts:     o,
		guard:    sharedGuard(),
		done:     make(chan struct{}),
		latest:   make(map[string]stored),
		sessions: make(map[string]string, len(o.Sessions)),
		windows:  make(map[string][]time.Time),
		members:  make(map[string]map[string]bool),
		inFleet:  make(map[string]map[string]stored),
	}
	for k, v := range o.Sessions {
		s.sessions[k] = v
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "delx-fake", Version: "1"}, nil)
	s.addTools()
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	if o.TLS {
		s.ts = httptest.NewTLSServer(http.HandlerFunc(s.serveHTTP))
	} else {
		s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	}
	return s
}

// Certificate is the certificate of a TLS server (Options.TLS), nil
// otherwise.
func (s *Server) Certificate() *x509.Certificate { return s.ts.Certificate() }

// URL is the MCP endpoint.
func (s *Server) URL() string { return s.ts.URL + "/v1/mcp" }

// RegistrationURL is the registration endpoint.
func (s *Server) RegistrationURL() string { return s.ts.URL + RegistrationPath }

// Registrations returns every call to the registration endpoint so far.
func (s *Server) Registrations() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Registration(nil), s.regs...)
}

// sessionOwner returns the agent_id that owns a session.
func (s *Server) sessionOwner(session string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.sessions[session]
	return a, ok
}

// SetToken sets (or, with "", removes) an agent's token, as a rotation on
// the Delx side would.
func (s *Server) SetToken(agentID, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token == "" {
		delete(s.opts.AgentTokens, agentID)
	} else {
		s.opts.AgentTokens[agentID] = token
	}
}

// Close stops the fake: pending slow faults end, MCP sessions close, the
// HTTP server shuts down. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		for ss := range s.mcp.Sessions() {
			_ = ss.Close()
		}
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// Calls returns every tools/call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	copy(out, s.calls)
	return out
}

// Notes returns the capsules leave_hive_note accepted, in order.
func (s *Server) Notes() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]json.RawMessage, len(s.notes))
	copy(out, s.notes)
	return out
}

// Requests returns every HTTP request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// MaxInWindow returns the largest number of HTTP requests that arrived
// within any span of length window.
func (s *Server) MaxInWindow(window time.Duration) int {
	s.mu.Lock()
	times := make([]time.Time, len(s.requests))
	for i, r := range s.requests {
		times[i] = r.At
	}
	s.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	best, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// serveHTTP is the Delx layer in front of the MCP handler.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == RegistrationPath {
		s.serveRegister(w, r)
		return
	}
	now := time.Now()
	var info rpcInfo
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
		if err != nil {
			http.Error(w, "reading the body failed", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		info = parseRPC(body)
	}
	agent := r.Header.Get(HeaderAgentID)
	idx := s.logRequest(Request{
		At:           now,
		Method:       r.Method,
		URL:          r.URL.RequestURI(),
		RPCMethod:    info.method,
		MCPSessionID: r.Header.Get("Mcp-Session-Id"),
		AgentID:      agent,
	})
	// The status is logged as it is written, before the client can see it.
	rec := &statusRecorder{ResponseWriter: w, onStatus: func(code int) { s.setStatus(idx, code) }}

	if f, ok := s.nextFault(info); ok {
		if handled := s.applyFault(w, rec, r, info, f); handled {
			return
		}
	}

	if r.Method != http.MethodGet && !acceptsJSON(r.Header.Values("Accept")) {
		s.recordHTTP(info, r, now, "http_406")
		writeJSON(rec, http.StatusNotAcceptable, map[string]any{"error": map[string]string{
			"code": "NOT_ACCEPTABLE", "message": "Accept must include application/json",
		}})
		return
	}

	if !s.authorized(agent, r.Header.Get(HeaderAgentToken)) {
		s.recordHTTP(info, r, now, "http_401")
		rec.Header().Set("WWW-Authenticate", `DelxAgent realm="delx"`)
		writeJSON(rec, http.StatusUnauthorized, map[string]any{"error": map[string]string{
			"code": "UNAUTHORIZED", "message": "missing or invalid agent credential",
		}})
		return
	}

	key := agent
	if key == "" {
		key, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	wait, remaining, limited := s.limit(key, now)
	if limited {
		s.recordHTTP(info, r, now, "rate_limited")
		s.writeRateLimited(rec, info, wait)
		return
	}
	setRateHeaders(rec.Header(), s.opts.Limit, remaining, s.opts.Window)

	s.handler.ServeHTTP(rec, r)
}

// authorized checks the credential headers.
func (s *Server) authorized(agent, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ok := s.opts.AgentTokens[agent]
	return ok && agent != "" && token != "" && token == want
}

// limit applies the sliding-window rate limit for one client: it returns
// how long until a slot frees when the client is over the limit.
func (s *Server) limit(key string, now time.Time) (wait time.Duration, remaining int, limited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.windows[key]
	cut := 0
	for cut < len(log) && now.Sub(log[cut]) >= s.opts.Window {
		cut++
	}
	log = log[cut:]
	if len(log) >= s.opts.Limit {
		s.windows[key] = log
		return log[0].Add(s.opts.Window).Sub(now), 0, true
	}
	log = append(log, now)
	s.windows[key] = log
	return 0, s.opts.Limit - len(log), false
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

func setRateHeaders(h http.Header, limit, remaining int, window time.Duration) {
	h.Set("x-ratelimit-limit", strconv.Itoa(limit))
	h.Set("x-ratelimit-remaining", strconv.Itoa(remaining))
	h.Set("x-ratelimit-window", strconv.Itoa(int(window.Seconds())))
}

// writeRateLimited answers an over-limit request in the configured style.
func (s *Server) writeRateLimited(w http.ResponseWriter, info rpcInfo, wait time.Duration) {
	secs := retryAfterSeconds(wait)
	if s.opts.RateLimitStyle == StyleJSONRPC && info.isCall {
		writeRPCError(w, http.StatusOK, info.id, CodeRateLimited, "rate limit exceeded", map[string]any{"retry_after_seconds": secs})
		return
	}
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(secs))
	setRateHeaders(h, s.opts.Limit, 0, s.opts.Window)
	h.Set("x-ratelimit-reset", strconv.Itoa(secs))
	if s.opts.RateLimitStyle == StyleBoth && info.isCall {
		writeRPCError(w, http.StatusTooManyRequests, info.id, CodeRateLimited, "rate limit exceeded", map[string]any{"retry_after_seconds": secs})
		return
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"code": "RATE_LIMITED", "message": "rate limit exceeded", "retry_after_seconds": secs,
	}})
}

func (s *Server) logRequest(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	return len(s.requests) - 1
}

func (s *Server) setStatus(idx, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[idx].Status = status
}

// recordHTTP records a tools/call that the HTTP layer answered itself.
func (s *Server) recordHTTP(info rpcInfo, r *http.Request, at time.Time, result string) {
	if info.method != "tools/call" {
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		key = info.metaKey
	}
	s.record(Call{
		At:                 at,
		Tool:               info.tool,
		AgentID:            r.Header.Get(HeaderAgentID),
		SessionID:          info.sessionID,
		IdempotencyKey:     key,
		MetaIdempotencyKey: info.metaKey,
		Result:             result,
		Header:             r.Header.Clone(),
	})
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// rpcInfo is what the HTTP layer reads of a JSON-RPC POST.
type rpcInfo struct {
	method    string
	id        json.RawMessage
	isCall    bool
	tool      string
	sessionID string
	metaKey   string
}

func parseRPC(body []byte) rpcInfo {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				SessionID any `json:"session_id"`
			} `json:"arguments"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return rpcInfo{}
	}
	info := rpcInfo{method: m.Method, id: m.ID}
	info.isCall = len(m.ID) > 0 && string(m.ID) != "null" && m.Method != ""
	if m.Method == "tools/call" {
		info.tool = m.Params.Name
		info.sessionID, _ = m.Params.Arguments.SessionID.(string)
		info.metaKey, _ = m.Params.Meta[MetaIdempotencyKey].(string)
	}
	return info
}

// acceptsJSON reports whether Accept values include application/json.
func acceptsJSON(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
				return true
			}
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeRPCError answers a JSON-RPC call with an error response.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

// statusRecorder reports the status written through it, once.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	onStatus func(int)
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.onStatus(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush implements http.Flusher (the SSE answers flush per event).
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// sleep waits d, or less if the request or the server ends first; it
// reports whether the whole delay passed.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

var errNotHijackable = errors.New("delxtest: the response writer cannot be hijacked")

// reset drops the connection without an answer (TCP RST where possible).
func reset(w http.ResponseWriter) error {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errNotHijackable
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return conn.Close()
}

func (s *Server) String() string { return fmt.Sprintf("delxtest.Server(%s)", s.URL()) }
