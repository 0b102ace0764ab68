package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// Runtime is what the API serves: the daemon's running configuration.
type Runtime interface {
	// Agent picks the agent a request names; else the one whose workdir
	// holds cwd; else the only one. The guard is the one its writes pass.
	Agent(name, cwd string) (*agent.Agent, *guard.Guard, error)
	// Status is the daemon's state, for GET /v1/status.
	Status() Status
	// AgentConfig is the running configuration of the agent named, served
	// or not (a damaged one too); ok is false when there is none.
	AgentConfig(name string) (ac config.Agent, ok bool)
}

// Options configures the API.
type Options struct {
	Runtime Runtime
	Version string
	Logger  *slog.Logger
	// Metrics serves GET /metrics; Requests and Refused record each
	// request's latency (route, status) and each refusal (code).
	Metrics  http.Handler
	Requests *prometheus.HistogramVec
	Refused  *prometheus.CounterVec
	// MCPMaxSessions and MCPSessionIdle bound /mcp's sessions; Stopping
	// ends when the daemon stops, closing them. MCPSessions (label state:
	// idle, in_call) counts the live sessions and MCPEvicted the idle ones
	// closed to make room at the limit; either may be nil.
	MCPMaxSessions int
	MCPSessionIdle time.Duration
	MCPSessions    *prometheus.GaugeVec
	MCPEvicted     prometheus.Counter
	Stopping       context.Context
	// Token is the loopback listener's bearer token now (a reload may
	// change it); "" refuses every request there.
	Token func() string
	// UI is the web page (nil: none; its operations are not found).
	UI UI
}

// API is the local API: HTTP handlers that are doors onto the agents'
// operations (daemon/agent), and MCP at /mcp onto the same operations.
type API struct {
	o   Options
	log *slog.Logger
	// openAPI makes OpenAPIDocument once, when first asked.
	openAPI func() ([]byte, error)
	// stdio counts the MCP sessions on stdio (GET /mcp/stdio) of every
	// listener: net/http's Shutdown no longer sees their connections once
	// taken over, so the daemon waits for them (WaitStdioSessions).
	stdio *stdioSessions
}

// New returns the API.
func New(o Options) *API {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{o: o, log: o.Logger, openAPI: sync.OnceValues(OpenAPIDocument),
		stdio: newStdioSessions(o.MCPMaxSessions, o.MCPSessions)}
}

// Handler is the local API as the Unix socket serves it. Each call builds
// a handler of its own (with its own MCP sessions), one per listener. The
// routes are the table's (package ops): each operation's handler is found
// by its name; an operation without one, or a handler without an
// operation, is a bug caught at start-up (and by the tests).
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	exact := exactRoutes{}
	inner := a.recoverPanics(exact.before(mux))
	if err := a.route(mux, exact, a.doors(inner)); err != nil {
		panic(err)
	}
	methods := ops.Methods()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A path the API knows but does not serve here (GET /metrics
		// without Options.Metrics) is not found, not "use GET".
		if allowed, ok := methods[r.URL.Path]; ok && !slices.Contains(allowed, r.Method) {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, capsule.Refuse(capsule.CodeMethodNotAllowed, "",
				"%s does not take %s; use %s", r.URL.Path, r.Method, strings.Join(allowed, " or ")))
			return
		}
		notFound(w, r)
	})
	return a.instrument(inner, methods)
}

// exactRoutes are the routes whose path has no wildcard, by method and
// path: a request for one of them goes straight to its handler, which
// takes 2.5% off a resume from another process (docs/PERFORMANCE.md);
// anything else (a wildcard, a path to clean, a method to refuse, HEAD)
// is the mux's.
type exactRoutes map[methodPath]http.HandlerFunc

type methodPath struct{ method, path string }

// add routes method and path to h, on the mux and, with no wildcard in
// path, here.
func (e exactRoutes) add(mux *http.ServeMux, method, path string, h http.HandlerFunc) {
	mux.HandleFunc(method+" "+path, h)
	if !strings.Contains(path, "{") {
		e[methodPath{method, path}] = h
	}
}

// before is the handler that looks here first, then in next.
func (e exactRoutes) before(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := e[methodPath{r.Method, r.URL.Path}]; ok {
			h(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// notFound is the answer for a path the API does not serve.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, capsule.Refuse(capsule.CodeNotFound, "",
		"no such path %q; see the local API table in docs/API.md", r.URL.Path))
}

// door is an operation's handler: for one agent (with the guard its writes
// pass), or for the daemon as a whole.
type door struct {
	agent agentHandler
	plain http.HandlerFunc
	// caller: the agent's handler is told who calls (agent.WithCaller),
	// for what it checks against the caller's rights (a signal's
	// transcript). Only those doors pay for the request's copy.
	caller bool
}

// doors are the handlers of the table's operations, by name. The three
// methods of /mcp share one handler (one set of sessions); /mcp/stdio
// counts its sessions beside them. The MCP sessions' tools call api, the
// routes these doors make, in process.
func (a *API) doors(api http.Handler) map[string]door {
	mcp := a.mcpHandler(api).ServeHTTP
	return map[string]door{
		ops.Resume.Op().Name:            {agent: a.handleResume},
		ops.Checkpoint.Op().Name:        {agent: a.handleCheckpoint},
		ops.Wait.Op().Name:              {agent: a.handleWait},
		ops.CapsuleGet.Op().Name:        {agent: a.handleCapsuleGet},
		ops.CapsulePut.Op().Name:        {agent: bodyDoor((*agent.Agent).PutCapsule)},
		ops.Seal.Op().Name:              {agent: bodyDoor((*agent.Agent).Seal)},
		ops.Signal.Op().Name:            {agent: bodyDoor((*agent.Agent).Signal), caller: true},
		ops.DeadLetters.Op().Name:       {agent: a.handleDeadLetters},
		ops.DeadLetterRetry.Op().Name:   {agent: a.handleDeadLetterAction(true)},
		ops.DeadLetterDiscard.Op().Name: {agent: a.handleDeadLetterAction(false)},
		ops.Snapshots.Op().Name:         {agent: a.handleSnapshots},
		ops.SnapshotTake.Op().Name:      {agent: bodyDoor((*agent.Agent).SnapshotTake)},
		ops.SnapshotShow.Op().Name:      {agent: a.handleSnapshot},
		ops.SnapshotRestore.Op().Name:   {agent: a.handleSnapshotRestore},
		ops.WorkLostRestore.Op().Name:   {agent: a.handleWorkLostRestore},
		ops.History.Op().Name:           {agent: a.handleHistory},
		ops.HistoryRestore.Op().Name:    {agent: a.handleHistoryRestore},
		ops.Log.Op().Name:               {agent: a.handleLog},
		ops.Status.Op().Name:            {plain: a.handleStatus},
		ops.Health.Op().Name:            {plain: a.handleHealth},
		ops.Metrics.Op().Name:           {plain: a.handleMetrics},
		ops.Fleet.Op().Name:             {plain: a.handleFleet},
		ops.FleetTake.Op().Name:         {agent: a.handleFleetTake},
		ops.OpenAPI.Op().Name:           {plain: a.handleOpenAPI},
		ops.MCPPost.Op().Name:           {plain: mcp},
		ops.MCPStream.Op().Name:         {plain: mcp},
		ops.MCPClose.Op().Name:          {plain: mcp},
		ops.MCPStdio.Op().Name:          {plain: a.mcpStdioHandler(api)},
		ops.UILogin.Op().Name:           {plain: a.handleUILogin},
		ops.UIRevoke.Op().Name:          {plain: a.handleUIRevoke},
	}
}

// route registers each operation of the table on mux with its door, and
// says which operation has no door (or the wrong kind) and which door has
// no operation. A second answer of a route (Op.When) is its route's door's
// to give.
func (a *API) route(mux *http.ServeMux, exact exactRoutes, doors map[string]door) error {
	var problems []string
	seen := map[string]bool{}
	for _, o := range ops.Table() {
		seen[o.Name] = true
		d, ok := doors[o.Name]
		switch {
		case o.When != "" && ok:
			problems = append(problems, fmt.Sprintf("%s is a second answer of %s %s (%s) and has a handler of its own", o.Name, o.Method, o.Path, o.When))
		case o.When != "":
		case !ok:
			problems = append(problems, fmt.Sprintf("operation %s (%s) has no handler", o.Name, o.Pattern()))
		case o.Agent && d.agent == nil, !o.Agent && d.plain == nil:
			problems = append(problems, fmt.Sprintf("operation %s: its handler is not of its kind (on one agent: %v)", o.Name, o.Agent))
		case o.Agent:
			exact.add(mux, o.Method, o.Path, a.withAgent(d.agent, d.caller))
		default:
			exact.add(mux, o.Method, o.Path, d.plain)
		}
	}
	for name := range doors {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("handler %s has no operation in the table", name))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return errors.New("api: the routes do not match the table of operations (package ops): " + strings.Join(problems, "; "))
	}
	return nil
}

// handleHealth is GET /healthz.
func (a *API) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ops.HealthAnswer{OK: true, Version: a.o.Version})
}

// handleMetrics is GET /metrics; without Options.Metrics the path is not
// served here. A caller on the socket is shown the series of the agents
// it may use only (MayShowAgent), as /v1/status lists only those: the
// daemon-wide series (requests, refusals, deliveries by upstream) are
// everyone's who reaches the socket.
func (a *API) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if a.o.Metrics == nil {
		notFound(w, r)
		return
	}
	if p := peerOf(r.Context()); p != nil {
		rt := a.o.Runtime
		r = r.WithContext(context.WithValue(r.Context(), agentFilterKey{}, func(name string) bool {
			if rt == nil {
				return false
			}
			ac, ok := rt.AgentConfig(name)
			return ok && p.mayUse(ac) == nil
		}))
	}
	a.o.Metrics.ServeHTTP(w, r)
}

// agentFilterKey carries, in a /metrics request's context, which agents'
// series its caller may see.
type agentFilterKey struct{}

// MayShowAgent reports whether the caller of a request handed to
// Options.Metrics may see the series labelled with agent (every agent's,
// for a caller who may use them all).
func MayShowAgent(ctx context.Context, agent string) bool {
	may, ok := ctx.Value(agentFilterKey{}).(func(string) bool)
	return !ok || may(agent)
}

// ShowsEveryAgent reports whether the caller of a request handed to
// Options.Metrics may see every agent's series.
func ShowsEveryAgent(ctx context.Context) bool {
	_, filtered := ctx.Value(agentFilterKey{}).(func(string) bool)
	return !filtered
}

// LoopbackHandler is the local API as the loopback TCP listener on port
// serves it: behind the token and the Host and Origin checks.
func (a *API) LoopbackHandler(port string) http.Handler {
	return a.requireToken(a.Handler(), port)
}

// agentHandler is a handler for one agent's resource, with the guard its
// writes pass.
type agentHandler func(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard)

// withAgent is h behind the pick of its agent and the caller's access to
// it; with caller, h's request carries who calls (agent.WithCaller).
func (a *API) withAgent(h agentHandler, caller bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := peerOf(r.Context())
		ag, g, err := a.pickAgent(r.Context(), queryGet(r.URL.RawQuery, "agent"), queryGet(r.URL.RawQuery, "cwd"))
		if err == nil {
			err = p.mayUse(ag.Config())
		} else {
			err = agentRefusal(a.o.Runtime, p, err)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		if caller && p != nil && p.err == nil {
			r = r.WithContext(agent.WithCaller(r.Context(), p.cred.UID))
		}
		h(w, r, ag, g)
	}
}

// recoverPanics turns a handler bug into a 500 for that request instead of
// a dead daemon.
func (a *API) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				writeError(w, capsule.Refuse(capsule.CodeInternal, "",
					"internal error; nothing was saved by this request"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// requireToken guards the loopback TCP listener on port: the Host must name
// loopback with that port, an Origin (when a browser sends one) must be a
// loopback origin on that port, and the bearer token must match. r.Host is
// never trusted as the origin to compare with: a page whose own host name
// was rebound to 127.0.0.1 (DNS rebinding) sends its own name in both Host
// and Origin.
func (a *API) requireToken(h http.Handler, port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHostPort(r.Host, "80", port) {
			writeError(w, capsule.Refuse(capsule.CodeForbiddenHost, "",
				"the loopback listener answers only to Host 127.0.0.1:%s, localhost:%s or [::1]:%s; a request for another host name (a DNS-rebound page) is refused", port, port, port))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o, port) {
			writeError(w, capsule.Refuse(capsule.CodeForbiddenOrigin, "",
				"requests from a page on another origin are refused; only http(s)://localhost:%s, 127.0.0.1:%s or [::1]:%s may send an Origin", port, port, port))
			return
		}
		if !a.tokenMatches(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="continuityd"`)
			writeError(w, capsule.Refuse(capsule.CodeUnauthorized, "",
				"the loopback listener needs Authorization: Bearer <token from api.token in the state directory>"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenMatches reports whether an Authorization header carries the token
// the listener takes now: read at each request, so that a token removed
// or replaced (and the daemon reloaded) is refused from then on. Without
// a token nothing matches.
func (a *API) tokenMatches(auth string) bool {
	tok := ""
	if a.o.Token != nil {
		tok = a.o.Token()
	}
	if tok == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(auth), []byte("Bearer "+tok)) == 1
}

// loopbackHostPort reports whether hostport (a Host header, or an origin's
// host) names a loopback address — localhost or a loopback IP literal —
// with port; a missing port means defaultPort. port "" accepts any port.
func loopbackHostPort(hostport, defaultPort, port string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil { // no port
		host, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defaultPort
	}
	if port != "" && p != port {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOrigin reports whether origin is http(s) on a loopback host with
// port ("" for any). "null" (a sandboxed or file:// page) is no loopback
// origin and is refused.
func loopbackOrigin(origin, port string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return loopbackHostPort(u.Host, "80", port)
	case "https":
		return loopbackHostPort(u.Host, "443", port)
	}
	return false
}

// socketOrigin reports whether an Origin is acceptable on the Unix socket,
// which no browser reaches unless something forwards to it: a loopback
// origin (any port), or the request's own host when that is a single label
// such as "d" or "continuityd" (what MCP clients over a socket put in their
// URL, and a name no rebinding attacker can own); never a dotted name.
func socketOrigin(origin, host string) bool {
	if loopbackOrigin(origin, "") {
		return true
	}
	if host == "" || strings.ContainsAny(host, ".:[]") {
		return false
	}
	for _, scheme := range []string{"http://", "https://"} {
		if strings.EqualFold(origin, scheme+host) {
			return true
		}
	}
	return false
}

// readBody reads a request body of at most capsule.MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *capsule.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, guard.MaxBodyBytes))
	if err != nil {
		return nil, bodyRefusal(err, guard.MaxBodyBytes)
	}
	return body, nil
}

// bodyRefusal is the refusal for a body that could not be read: too large,
// too slow (the connection is closed after the answer), or cut off.
func bodyRefusal(err error, limit int64) *capsule.Error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return capsule.Refuse(capsule.CodeBodyTooLarge, "",
			"the body is over %d bytes (%d KiB); nothing was saved", limit, limit>>10)
	case isTimeout(err):
		limit := config.DefaultReadTimeout
		if slow := (*bodyTooSlow)(nil); errors.As(err, &slow) {
			limit = slow.limit
		}
		return capsule.Refuse(capsule.CodeRequestTimeout, "",
			"the body did not arrive within %s; nothing was saved", limit)
	default:
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "could not read the body: %v", err)
	}
}

// errorBody is the interface's error shape.
type errorBody struct {
	Error *capsule.Error `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	var ce *capsule.Error
	switch {
	case errors.As(err, &ce):
	case errors.Is(err, residency.ErrClosed):
		ce = capsule.Refuse(capsule.CodeShuttingDown, "",
			"the agent is stopping (shutdown or reload); nothing was saved: retry in a moment")
	default:
		ce = capsule.Refuse(capsule.CodeInternal, "", "%v", err)
	}
	if rec, ok := w.(*recorder); ok {
		rec.code = ce.Code
	}
	status := ce.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, errorBody{Error: ce})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"INTERNAL","message":"could not encode the answer"}}` + "\n")
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody sends an encoded JSON answer, given in parts that are written
// one after the other. The explicit Content-Length spares answers over
// 2 KB the chunked encoding net/http falls back to.
func writeBody(w http.ResponseWriter, status int, parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	for _, p := range parts {
		w.Write(p)
	}
}
