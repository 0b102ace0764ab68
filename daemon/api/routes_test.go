package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/ops"
)

// The routes are the table's: an operation without a handler, or a handler
// without an operation, is refused (and Handler panics at start-up).
func TestRoutesMatchTheTable(t *testing.T) {
	if err := api.RouteProblems("", ""); err != nil {
		t.Fatalf("the table and the handlers: %v", err)
	}
	if err := api.RouteProblems(ops.Signal.Op().Name, ""); err == nil || !strings.Contains(err.Error(), "operation signal") {
		t.Errorf("an operation without a handler: %v", err)
	}
	if err := api.RouteProblems("", "nosuch"); err == nil || !strings.Contains(err.Error(), "handler nosuch") {
		t.Errorf("a handler without an operation: %v", err)
	}
}

// fallback reports whether an answer is the one for a route the API does
// not have: no such path (404), or a method the path does not take (405).
func fallback(status int, v map[string]any) bool {
	e, _ := v["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	return status == 404 && code == "NOT_FOUND" && strings.HasPrefix(msg, "no such path") ||
		status == 405 && code == "METHOD_NOT_ALLOWED"
}

// Every operation of the table is served at its method and path (an
// operation on one agent answers for the agent named, here one that does
// not exist), and no other method is served on the table's paths.
func TestEveryOperationIsRouted(t *testing.T) {
	ta := newTestAPI(t)
	for _, o := range ops.Table() {
		target := strings.ReplaceAll(o.Path, "{id}", "latest")
		if o.Agent {
			target += "?agent=nosuch"
			if o.When != "" {
				target += "&" + o.When
			}
		}
		body := ""
		if o.Request != nil {
			body = "{}"
		}
		if o.Name == ops.Metrics.Op().Name {
			continue // served only with Options.Metrics: TestMetricsRoute
		}
		status, _, v := ta.doAny(t, o.Method, target, body)
		if fallback(status, v) {
			t.Errorf("%s (%s): %d %v: not routed", o.Name, o.Pattern(), status, v)
		}
		if e, _ := v["error"].(map[string]any); o.Agent && e["code"] != "UNKNOWN_AGENT" {
			t.Errorf("%s (%s): %d %v, want UNKNOWN_AGENT from its agent's door", o.Name, o.Pattern(), status, v)
		}
	}
	for path, methods := range ops.Methods() {
		target := strings.ReplaceAll(path, "{id}", "latest")
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			if slices.Contains(methods, m) {
				continue
			}
			if status, _, v := ta.doAny(t, m, target, ""); !fallback(status, v) {
				t.Errorf("%s %s is no operation of the table, yet answered %d %v", m, target, status, v)
			}
		}
	}
}

// GET /metrics is served with Options.Metrics, and is not found without.
func TestMetricsRoute(t *testing.T) {
	ta := newTestAPI(t)
	if status, _, v := ta.do(t, http.MethodGet, "/metrics", ""); !fallback(status, v) || status != 404 {
		t.Errorf("without Options.Metrics: %d %v, want 404", status, v)
	}
	h := api.New(api.Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("up 1\n"))
	})}).Handler()
	rec := httptestRecorder(h, http.MethodGet, "/metrics")
	if rec.Code != 200 || rec.Body.String() != "up 1\n" {
		t.Errorf("with Options.Metrics: %d %q", rec.Code, rec.Body)
	}
}

// doAny is do for an answer of any kind: v is the JSON answer, or nil. A
// request that streams (GET /mcp) ends with its context, at the latest.
func (ta *testAPI) doAny(t *testing.T, method, target, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	ta.h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, target, rd))
	var v map[string]any
	json.Unmarshal(rec.Body.Bytes(), &v)
	return rec.Code, rec.Header(), v
}

func httptestRecorder(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}
