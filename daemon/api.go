package daemon

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/residency"
)

// routes are the local API's paths and their methods; anything else is a
// JSON 404 or 405 in the interface's error shape.
var routes = map[string][]string{
	"/v1/continuity":            {http.MethodGet},
	"/v1/continuity/checkpoint": {http.MethodPost},
	"/v1/continuity/wait":       {http.MethodGet},
	"/v1/capsule":               {http.MethodGet, http.MethodPut},
	"/v1/capsule/seal":          {http.MethodPost},
	"/v1/signals":               {http.MethodPost},
	"/v1/deadletter":            {http.MethodGet},
	"/v1/deadletter/retry":      {http.MethodPost},
	"/v1/deadletter/discard":    {http.MethodPost},
	"/v1/status":                {http.MethodGet},
	"/healthz":                  {http.MethodGet},
	"/metrics":                  {http.MethodGet},
	"/mcp":                      {http.MethodGet, http.MethodPost, http.MethodDelete},
}

// handler is the local API.
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/continuity", d.withAgent(d.handleResume))
	mux.HandleFunc("POST /v1/continuity/checkpoint", d.withAgent(d.handleCheckpoint))
	mux.HandleFunc("GET /v1/continuity/wait", d.withAgent(d.handleWait))
	mux.HandleFunc("GET /v1/capsule", d.withAgent(d.handleCapsuleGet))
	mux.HandleFunc("PUT /v1/capsule", d.withAgent(d.handleCapsulePut))
	mux.HandleFunc("POST /v1/capsule/seal", d.withAgent(d.handleCapsuleSeal))
	mux.HandleFunc("POST /v1/signals", d.withAgent(d.handleSignal))
	mux.HandleFunc("GET /v1/deadletter", d.withAgent(d.handleDeadLetters))
	mux.HandleFunc("POST /v1/deadletter/retry", d.withAgent(d.handleDeadLetterAction(true)))
	mux.HandleFunc("POST /v1/deadletter/discard", d.withAgent(d.handleDeadLetterAction(false)))
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.Handle("GET /metrics", d.metrics.handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": d.version})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if methods, ok := routes[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, capsule.RefuseStatus(http.StatusMethodNotAllowed, capsule.CodeMethodNotAllowed, "",
				"%s does not take %s; use %s", r.URL.Path, r.Method, strings.Join(methods, " or ")))
			return
		}
		writeError(w, capsule.RefuseStatus(http.StatusNotFound, capsule.CodeNotFound, "",
			"no such path %q; see the local API table in README.md", r.URL.Path))
	})
	api := d.metrics.instrument(d.recoverPanics(mux))
	mux.Handle("/mcp", d.mcpHandler(api))
	return api
}

// agentHandler is a handler for one agent's resource; st is the running
// configuration the request started under.
type agentHandler func(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot)

func (d *Daemon) withAgent(h agentHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st := d.snap()
		q := r.URL.Query()
		a, err := st.agentFor(q.Get("agent"), q.Get("cwd"))
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, a, st)
	}
}

// recoverPanics turns a handler bug into a 500 for that request instead of
// a dead daemon.
func (d *Daemon) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				d.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				writeError(w, capsule.RefuseStatus(http.StatusInternalServerError, capsule.CodeInternal, "",
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
func (d *Daemon) requireToken(h http.Handler, port string) http.Handler {
	want := []byte("Bearer " + d.apiToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHostPort(r.Host, "80", port) {
			writeError(w, capsule.RefuseStatus(http.StatusForbidden, capsule.CodeForbiddenHost, "",
				"the loopback listener answers only to Host 127.0.0.1:%s, localhost:%s or [::1]:%s; a request for another host name (a DNS-rebound page) is refused", port, port, port))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o, port) {
			writeError(w, capsule.RefuseStatus(http.StatusForbidden, capsule.CodeForbiddenOrigin, "",
				"requests from a page on another origin are refused; only http(s)://localhost:%s, 127.0.0.1:%s or [::1]:%s may send an Origin", port, port, port))
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="continuityd"`)
			writeError(w, capsule.RefuseStatus(http.StatusUnauthorized, capsule.CodeUnauthorized, "",
				"the loopback listener needs Authorization: Bearer <token from api.token in the state directory>"))
			return
		}
		h.ServeHTTP(w, r)
	})
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
		return capsule.RefuseStatus(http.StatusRequestEntityTooLarge, capsule.CodeBodyTooLarge, "",
			"the body is over %d bytes (%d KiB); nothing was saved", limit, limit>>10)
	case isTimeout(err):
		return capsule.RefuseStatus(http.StatusRequestTimeout, capsule.CodeRequestTimeout, "",
			"the body did not arrive within %s; nothing was saved", bodyTimeout)
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
		ce = capsule.RefuseStatus(http.StatusServiceUnavailable, capsule.CodeShuttingDown, "",
			"the agent is stopping (shutdown or reload); nothing was saved: retry in a moment")
	default:
		ce = capsule.RefuseStatus(http.StatusInternalServerError, capsule.CodeInternal, "", "%v", err)
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

// writeBody sends an encoded JSON answer. The explicit Content-Length
// spares answers over 2 KB the chunked encoding net/http falls back to.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
