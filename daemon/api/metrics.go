package api

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder captures a response's status and error code for the metrics.
type recorder struct {
	http.ResponseWriter
	status int
	code   string
}

func (r *recorder) WriteHeader(s int) {
	r.status = s
	r.ResponseWriter.WriteHeader(s)
}

// Flush keeps streaming (MCP over HTTP) working through the recorder.
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError flushes and says whether the answer reached the connection
// (http.ResponseController prefers it to Flush): a resume resets
// since_last_visit only when it did.
func (r *recorder) FlushError() error {
	return http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack takes the connection over (GET /mcp/stdio) and records 101.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.status = http.StatusSwitchingProtocols
	}
	return c, brw, err
}

// instrument records each request's latency by route (a path of the table
// of operations, methods; any other "other") and status, and each refusal
// by code.
func (a *API) instrument(h http.Handler, methods map[string][]string) http.Handler {
	// Each route and status's observer, looked up once: the labels'
	// hashing and lookup cost a request as much as its observation.
	var observers sync.Map // observerKey → prometheus.Observer
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		route := r.URL.Path
		if _, ok := methods[route]; !ok {
			route = "other"
		}
		// A connection taken over (101) lasted as long as its session:
		// no request's latency.
		if a.o.Requests != nil && rec.status != http.StatusSwitchingProtocols {
			k := observerKey{route: route, status: rec.status}
			o, ok := observers.Load(k)
			if !ok {
				o, _ = observers.LoadOrStore(k, a.o.Requests.WithLabelValues(route, strconv.Itoa(rec.status)))
			}
			o.(prometheus.Observer).Observe(time.Since(start).Seconds())
		}
		if rec.code != "" && a.o.Refused != nil {
			a.o.Refused.WithLabelValues(rec.code).Inc()
		}
	})
}

// observerKey names one series of the request latency histogram.
type observerKey struct {
	route  string
	status int
}
