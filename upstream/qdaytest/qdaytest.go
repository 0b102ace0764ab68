// Package qdaytest is an in-process fake of the Q-Day continuity API
// (qday-continuity(7)) for tests. It enforces the documented rules instead
// of answering 200 to everything:
//
//   - every call needs Authorization: Bearer <token> (401 UNAUTHORIZED);
//   - a token bucket per token over all endpoints (429 with Retry-After in
//     the configured form; a refused request is not applied);
//   - POST /v1/continuity/checkpoint is checked with capsule's Guard (the
//     seed's codes and statuses), then against the token's residency: a
//     stopped residency answers 409 RESIDENCY_STOPPED until a checkpoint
//     carries resume_residency: true, at most 12 commitments are open
//     (400 TOO_MANY_OPEN_LOOPS), close and drop name an open commitment;
//   - GET /v1/continuity resumes, GET /v1/continuity/wait long-polls
//     (max_seconds 1..90, default 20) until the test calls PushEvent.
//
// Faults are injected from a script (Script) or at random (SetFailRate);
// every request is recorded (Requests, Accepted, MaxInWindow) so a test can
// check what a client sent, with which headers, and how fast.
//
// What the seed leaves open is guessed the way upstreams.md guesses it:
// errors are {"error":{"code","message"}}, 429 carries Retry-After unless
// told otherwise, and Idempotency-Key is recorded but not honoured (a
// replayed checkpoint is applied again), so a test sees every duplicate.
package qdaytest

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/testkit/guardtest"
)

// Paths the server answers.
const (
	ResumePath     = "/v1/continuity"
	CheckpointPath = "/v1/continuity/checkpoint"
	WaitPath       = "/v1/continuity/wait"
)

// MaxRequestBytes bounds a request body the server reads; a larger one is
// answered 413 BODY_TOO_LARGE. The guard refuses far smaller bodies itself.
const MaxRequestBytes = 1 << 20

// Forms of Retry-After on a 429 (Options.RetryAfter).
const (
	RetryAfterSeconds  = "seconds"   // delta seconds, rounded up
	RetryAfterHTTPDate = "http-date" // an IMF-fixdate, rounded up to the second
	RetryAfterNone     = "none"      // no Retry-After header at all
)

// Options configures a Server.
type Options struct {
	// Token is the bearer token every call must carry; "" accepts any
	// non-empty bearer token (each token gets its own residency and
	// rate-limit bucket either way).
	Token string
	// Rate is the number of requests per second allowed per token, over
	// all endpoints; 0 means unlimited. Burst is the bucket's size (at
	// least 1 when Rate is set).
	Rate  float64
	Burst int
	// RetryAfter is how a 429 carries Retry-After: RetryAfterSeconds
	// (default), RetryAfterHTTPDate or RetryAfterNone.
	RetryAfter string
	// Seed seeds the random faults of SetFailRate.
	Seed int64
	// TimeScale multiplies the time a wait holds the connection
	// (max_seconds × TimeScale), so a test can exercise the timeout path in
	// milliseconds; 0 means 1.
	TimeScale float64
	// Guard checks checkpoint bodies; nil uses one shared by every Server
	// of the process (building a Guard costs tens of milliseconds).
	Guard *guard.Guard
}

// FaultKind names an injected fault. Request.Fault records it as a string.
type FaultKind string

// Fault kinds. A faulted request is not applied (except Slow, which only
// delays a normal answer).
const (
	// Status400 answers 400 INVALID_PUBLIC_STATUS.
	Status400 FaultKind = "400"
	// Status401 answers 401 UNAUTHORIZED.
	Status401 FaultKind = "401"
	// Status403 answers 403 FORBIDDEN.
	Status403 FaultKind = "403"
	// Status409 answers 409 RESIDENCY_STOPPED.
	Status409 FaultKind = "409"
	// Status429 answers 429 RATE_LIMITED with Retry-After in the
	// Options.RetryAfter form (1 second) unless the Fault overrides it.
	Status429 FaultKind = "429"
	// Status500, Status502 and Status503 answer those statuses with a JSON
	// error body (and Retry-After only when the Fault sets one).
	Status500 FaultKind = "500"
	Status502 FaultKind = "502"
	Status503 FaultKind = "503"
	// Slow sleeps Fault.Delay (default 100ms), then answers normally.
	Slow FaultKind = "slow"
	// Hang never answers: it holds the connection until the client gives
	// up or the server closes.
	Hang FaultKind = "hang"
	// Reset hijacks the connection and closes it (with a TCP RST) without
	// answering.
	Reset FaultKind = "reset"
	// Garbage500 answers 500 with a body that is not JSON.
	Garbage500 FaultKind = "garbage500"
	// Garbage200 is the lying server: it answers 200 with a body that is
	// not JSON and does NOT apply the request. A client that trusts a 2xx
	// status (as it should) counts the write as delivered and it is lost
	// upstream; tests use it to show what such a server costs, not as a
	// case a client is expected to detect.
	Garbage200 FaultKind = "garbage200"
)

// Fault is one injected fault.
type Fault struct {
	Kind FaultKind
	// RetryAfter, when set, is sent verbatim as Retry-After ("2", or an
	// HTTP-date) on any status fault.
	RetryAfter string
	// NoRetryAfter drops Retry-After from a Status429 fault.
	NoRetryAfter bool
	// Delay is how long Slow sleeps (default 100ms).
	Delay time.Duration
	// Path, when set, limits the fault to requests on that path: requests
	// elsewhere (a client's long poll, say) pass it by without using it.
	Path string
	// Message, when set, replaces a status fault's error message: what a
	// hostile or broken upstream may say.
	Message string
}

// defaultFaultKinds are SetFailRate's kinds when none are given: the
// transient faults a client must ride out.
var defaultFaultKinds = []FaultKind{Status429, Status500, Status502, Status503, Reset, Garbage500}

// Request is one request as the server saw it.
type Request struct {
	At             time.Time // arrival
	Method, Path   string
	Query          string // the raw query
	Header         http.Header
	Body           []byte
	IdempotencyKey string
	// Status is the answer's status; 0 when there was none (Hang, Reset,
	// a client that went away, a server that closed).
	Status int
	// Fault is the injected fault's kind, "" when none.
	Fault string
	// Applied reports whether the request changed the residency: a
	// checkpoint answered 200 with the saved state.
	Applied bool
}

// Server is the fake. It is safe for concurrent use.
type Server struct {
	opts   Options
	scale  float64
	guard  *guard.Guard
	ts     *httptest.Server
	closed chan struct{}
	once   sync.Once

	mu          sync.Mutex
	requests    []Request
	script      []Fault
	failPath    string
	failRate    float64
	failKinds   []FaultKind
	rng         *rand.Rand
	buckets     map[string]*bucket
	residencies map[string]*residency
	directions  []json.RawMessage
	events      []json.RawMessage
	wake        chan struct{} // closed and replaced by PushEvent
	nextID      int
}

// New starts a Server on 127.0.0.1. It panics on bad Options (an unknown
// RetryAfter form, a negative Rate) and when the shared Guard cannot be
// built.
func New(o Options) *Server {
	switch o.RetryAfter {
	case "":
		o.RetryAfter = RetryAfterSeconds
	case RetryAfterSeconds, RetryAfterHTTPDate, RetryAfterNone:
	default:
		panic(fmt.Sprintf("qdaytest: Options.RetryAfter %q is not seconds, http-date or none", o.RetryAfter))
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		panic(fmt.Sprintf("qdaytest: Options.Rate %v is not a rate", o.Rate))
	}
	if o.Rate > 0 && o.Burst < 1 {
		o.Burst = 1
	}
	s := &Server{
		opts:        o,
		scale:       o.TimeScale,
		guard:       o.Guard,
		closed:      make(chan struct{}),
		rng:         rand.New(rand.NewPCG(uint64(o.Seed), 0x71646179)),
		buckets:     map[string]*bucket{},
		residencies: map[string]*residency{},
		wake:        make(chan struct{}),
	}
	if s.scale <= 0 {
		s.scale = 1
	}
	if s.guard == nil {
		g, err := guardtest.Shared()
		if err != nil {
			panic(fmt.Sprintf("qdaytest: building the guard: %v", err))
		}
		s.guard = g
	}
	s.ts = httptest.NewServer(s) // 127.0.0.1:0
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.ts.URL }

// Close stops the server: requests held by Hang, Slow or a wait are cut
// (their connections closed without an answer), and Close returns once
// every handler has.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.ts.Close()
	})
}

// Script queues faults; each incoming request consumes the next one before
// anything else happens (authentication, rate limiting, validation).
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, faults...)
}

// ScriptLen is the number of scripted faults not yet consumed.
func (s *Server) ScriptLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// SetFailRatePath is SetFailRate limited to requests on path.
func (s *Server) SetFailRatePath(path string, p float64, kinds ...FaultKind) {
	s.SetFailRate(p, kinds...)
	s.mu.Lock()
	s.failPath = path
	s.mu.Unlock()
}

// SetFailRate makes each request that finds the script empty fail with
// probability p, with a kind drawn from kinds (default: 429, 500, 502,
// 503, Reset, Garbage500). The draws come from Options.Seed, so a run with
// the same requests in the same order fails the same way. p <= 0 turns
// random faults off.
func (s *Server) SetFailRate(p float64, kinds ...FaultKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRate = p
	s.failKinds = append([]FaultKind(nil), kinds...)
	if len(s.failKinds) == 0 {
		s.failKinds = append(s.failKinds, defaultFaultKinds...)
	}
}

// SetDirections sets the directions every resume returns (nil or none: an
// empty list, meaning nothing waits on the agent).
func (s *Server) SetDirections(dirs ...json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directions = cloneRaws(dirs)
}

// PushEvent puts an event in the inbox. A wait in progress wakes at once
// with every queued event; with no wait in progress the events stay queued
// for the next one. The server has one inbox, whatever the token. Events
// taken by a wait whose client has just gone away are lost with its
// answer, as they would be with a real long poll.
func (s *Server) PushEvent(ev json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, append(json.RawMessage(nil), ev...))
	close(s.wake)
	s.wake = make(chan struct{})
}

// Stopped reports whether token's residency is stopped.
func (s *Server) Stopped(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.residencies[token]
	return r != nil && r.stopped
}

// Requests returns every request so far, in arrival order (copies).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = cloneRequest(r)
	}
	return out
}

// Accepted returns the checkpoints the server applied (answered 200 with
// the saved state), in arrival order. A Garbage200 answer is a 200 that
// applied nothing, so it is not here.
func (s *Server) Accepted() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if r.Path == CheckpointPath && r.Applied {
			out = append(out, cloneRequest(r))
		}
	}
	return out
}

// MaxInWindow is the largest number of requests (all of them, whatever
// their answer) that arrived within any window of the given length: a
// client that keeps to rate r and burst b never exceeds r×window + b.
func (s *Server) MaxInWindow(window time.Duration) int {
	s.mu.Lock()
	at := make([]time.Time, len(s.requests))
	for i, r := range s.requests {
		at[i] = r.At
	}
	s.mu.Unlock()
	return maxInWindow(at, window)
}

// maxInWindow counts, over sorted times, the most that fall in any
// half-open window [t, t+window).
func maxInWindow(at []time.Time, window time.Duration) int {
	best, i := 0, 0
	for j := range at {
		for at[j].Sub(at[i]) >= window {
			i++
		}
		if n := j - i + 1; n > best {
			best = n
		}
	}
	return best
}

func cloneRequest(r Request) Request {
	r.Header = r.Header.Clone()
	r.Body = append([]byte(nil), r.Body...)
	return r
}

func cloneRaws(rs []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(rs))
	for _, r := range rs {
		out = append(out, append(json.RawMessage(nil), r...))
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	// Reading the whole body also lets net/http notice a client that hangs
	// up, which cancels r.Context() (Hang and wait depend on it).
	idx := s.record(r, body)
	res := &result{}
	defer func() { s.finish(idx, res) }()

	if f, ok := s.nextFault(idx); ok {
		res.fault = string(f.Kind)
		if !s.fault(w, r, f, res) {
			return
		}
	}
	if readErr != nil {
		var mbe *http.MaxBytesError
		if errors.As(readErr, &mbe) {
			s.writeError(w, res, http.StatusRequestEntityTooLarge, capsule.CodeBodyTooLarge, "the body is too large")
			return
		}
		res.status = 0 // the client went away mid-body
		return
	}

	allow := ""
	switch r.URL.Path {
	case CheckpointPath:
		allow = http.MethodPost
	case ResumePath, WaitPath:
		allow = http.MethodGet
	default:
		s.writeError(w, res, http.StatusNotFound, capsule.CodeNotFound, "no such path")
		return
	}
	if r.Method != allow {
		w.Header().Set("Allow", allow)
		s.writeError(w, res, http.StatusMethodNotAllowed, capsule.CodeMethodNotAllowed, "use "+allow)
		return
	}
	token, ok := s.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qday"`)
		s.writeError(w, res, http.StatusUnauthorized, capsule.CodeUnauthorized, "a valid bearer token is required")
		return
	}
	if wait, ok := s.allow(token); !ok {
		s.setRetryAfter(w, wait)
		s.writeError(w, res, http.StatusTooManyRequests, "RATE_LIMITED", "too many requests; wait and retry")
		return
	}
	switch r.URL.Path {
	case CheckpointPath:
		s.checkpoint(w, token, body, res)
	case ResumePath:
		s.resume(w, token, res)
	case WaitPath:
		s.wait(w, r, res)
	}
}

// result is what a handler did, for the record.
type result struct {
	status  int
	fault   string
	applied bool
}

func (s *Server) record(r *http.Request, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		At:             time.Now(), // under the lock, so arrival order is time order
		Method:         r.Method,
		Path:           r.URL.Path,
		Query:          r.URL.RawQuery,
		Header:         r.Header.Clone(),
		Body:           body,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	return len(s.requests) - 1
}

func (s *Server) finish(idx int, res *result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[idx].Status = res.status
	s.requests[idx].Fault = res.fault
	s.requests[idx].Applied = res.applied
}

// nextFault takes the fault for request idx, if any, and marks the record
// at once (a Hang is recorded as such while it still holds the request).
func (s *Server) nextFault(idx int) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var f Fault
	path := s.requests[idx].Path
	switch {
	case len(s.script) > 0 && (s.script[0].Path == "" || s.script[0].Path == path):
		f = s.script[0]
		s.script = s.script[1:]
	case len(s.script) > 0:
		return Fault{}, false // the next fault waits for its path
	case s.failRate > 0 && (s.failPath == "" || s.failPath == path) && s.rng.Float64() < s.failRate:
		f = Fault{Kind: s.failKinds[s.rng.IntN(len(s.failKinds))]}
	default:
		return Fault{}, false
	}
	s.requests[idx].Fault = string(f.Kind)
	return f, true
}

// fault carries out f; it reports whether the request goes on to be
// handled normally (Slow).
func (s *Server) fault(w http.ResponseWriter, r *http.Request, f Fault, res *result) bool {
	switch f.Kind {
	case Slow:
		d := f.Delay
		if d <= 0 {
			d = 100 * time.Millisecond
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.Context().Done():
			return false
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	case Hang:
		select {
		case <-r.Context().Done():
			return false
		case <-s.closed:
			panic(http.ErrAbortHandler) // close the connection, no answer
		}
	case Reset:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST instead of FIN
		}
		_ = conn.Close()
		return false
	case Garbage200, Garbage500:
		status := http.StatusOK
		if f.Kind == Garbage500 {
			status = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<html><body>upstream proxy error {not json</body></html>\n")
		res.status = status
		return false
	}
	status, code, msg := 0, "", ""
	switch f.Kind {
	case Status400:
		status, code, msg = http.StatusBadRequest, capsule.CodeInvalidPublicStatus, "the status looks like a secret or links outside the allowed sites; nothing was saved"
	case Status401:
		status, code, msg = http.StatusUnauthorized, capsule.CodeUnauthorized, "a valid bearer token is required"
	case Status403:
		status, code, msg = http.StatusForbidden, "FORBIDDEN", "this token may not do that"
	case Status409:
		status, code, msg = http.StatusConflict, capsule.CodeResidencyStopped, "only a checkpoint with resume_residency: true lifts it"
	case Status429:
		status, code, msg = http.StatusTooManyRequests, "RATE_LIMITED", "too many requests; wait and retry"
		if f.RetryAfter == "" && !f.NoRetryAfter {
			s.setRetryAfter(w, time.Second)
		}
	case Status500:
		status, code, msg = http.StatusInternalServerError, "INTERNAL", "internal error"
	case Status502:
		status, code, msg = http.StatusBadGateway, "BAD_GATEWAY", "bad gateway"
	case Status503:
		status, code, msg = http.StatusServiceUnavailable, "UNAVAILABLE", "try again later"
	default:
		panic(fmt.Sprintf("qdaytest: unknown fault kind %q", f.Kind))
	}
	if f.RetryAfter != "" && !f.NoRetryAfter {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Message != "" {
		msg = f.Message
	}
	s.writeError(w, res, status, code, msg)
	return false
}

// setRetryAfter sets Retry-After for a wait of d in the configured form,
// rounded up so a client that honours it is never early.
func (s *Server) setRetryAfter(w http.ResponseWriter, d time.Duration) {
	switch s.opts.RetryAfter {
	case RetryAfterNone:
	case RetryAfterHTTPDate:
		t := time.Now().Add(d)
		if t2 := t.Truncate(time.Second); !t2.Equal(t) {
			t = t2.Add(time.Second)
		}
		w.Header().Set("Retry-After", t.UTC().Format(http.TimeFormat))
	default:
		secs := int64(math.Ceil(d.Seconds()))
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
}

func (s *Server) authenticate(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", false
	}
	if s.opts.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) != 1 {
		return "", false
	}
	return tok, true
}

// bucket is a token bucket: tokens refill at rate per second up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes a token from token's bucket; when there is none it reports
// how long until there is.
func (s *Server) allow(token string) (time.Duration, bool) {
	if s.opts.Rate <= 0 {
		return 0, true
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[token]
	if b == nil {
		b = &bucket{tokens: float64(s.opts.Burst), last: now}
		s.buckets[token] = b
	}
	b.tokens = math.Min(float64(s.opts.Burst), b.tokens+now.Sub(b.last).Seconds()*s.opts.Rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / s.opts.Rate * float64(time.Second)), false
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

func (s *Server) writeError(w http.ResponseWriter, res *result, status int, code, msg string) {
	s.writeJSON(w, res, status, errorBody{errorDetail{Code: code, Message: msg}})
}

func (s *Server) writeJSON(w http.ResponseWriter, res *result, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	res.status = status
}

// checkpoint handles POST /v1/continuity/checkpoint.
func (s *Server) checkpoint(w http.ResponseWriter, token string, body []byte, res *result) {
	cp, err := s.guard.DecodeCheckpoint(body)
	if err != nil {
		var ce *capsule.Error
		if !errors.As(err, &ce) {
			ce = capsule.Refuse(capsule.CodeInvalidJSON, "", "the body is not a valid checkpoint")
		}
		status := ce.Status
		if status == 0 {
			status = http.StatusBadRequest
		}
		s.writeJSON(w, res, status, errorBody{errorDetail{Code: ce.Code, Message: ce.Message, Field: ce.Field}})
		return
	}
	s.mu.Lock()
	rz := s.residency(token)
	ce := rz.apply(cp, time.Now(), &s.nextID)
	var view map[string]any
	if ce == nil {
		view = rz.saved()
	}
	s.mu.Unlock()
	if ce != nil {
		s.writeJSON(w, res, ce.Status, errorBody{errorDetail{Code: ce.Code, Message: ce.Message, Field: ce.Field}})
		return
	}
	res.applied = true
	s.writeJSON(w, res, http.StatusOK, view)
}

// resume handles GET /v1/continuity.
func (s *Server) resume(w http.ResponseWriter, token string, res *result) {
	s.mu.Lock()
	view := s.residency(token).resume(cloneRaws(s.directions))
	s.mu.Unlock()
	s.writeJSON(w, res, http.StatusOK, view)
}

// wait handles GET /v1/continuity/wait.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, res *result) {
	n := 20
	if v, ok := r.URL.Query()["max_seconds"]; ok {
		var err error
		n, err = strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 90 || len(v) > 1 {
			s.writeError(w, res, http.StatusBadRequest, capsule.CodeInvalidQuery, "max_seconds is an integer in 1..90")
			return
		}
	}
	timer := time.NewTimer(time.Duration(float64(n) * s.scale * float64(time.Second)))
	defer timer.Stop()
	for {
		s.mu.Lock()
		evs := s.events
		s.events = nil
		wake := s.wake
		s.mu.Unlock()
		if len(evs) > 0 {
			s.writeJSON(w, res, http.StatusOK, map[string]any{
				"woke": "event", "events": evs, "directions_scope": "inbox_and_commitments_only",
			})
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			s.writeJSON(w, res, http.StatusOK, map[string]any{
				"woke": "timeout", "events": []json.RawMessage{}, "directions_scope": "inbox_and_commitments_only",
			})
			return
		case <-r.Context().Done():
			return // the client gave up; nothing to answer
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
}

func (s *Server) residency(token string) *residency {
	rz := s.residencies[token]
	if rz == nil {
		rz = &residency{}
		s.residencies[token] = rz
	}
	return rz
}
