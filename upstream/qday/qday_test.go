package qday_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
	"github.com/continuityd/continuityd/upstream/qday"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tok = "tok-abc"

func staticToken(s string) func() (string, error) { return func() (string, error) { return s, nil } }

// newServer starts a fake closed at the end of the test.
func newServer(t *testing.T, o qdaytest.Options) *qdaytest.Server {
	t.Helper()
	s := qdaytest.New(o)
	t.Cleanup(s.Close)
	return s
}

// newClient builds a client with its own connection pool for url.
func newClient(t *testing.T, url string, edit ...func(*qday.Options)) *qday.Client {
	t.Helper()
	o := qday.Options{Name: "qday", URL: url, Token: staticToken(tok), Timeout: 20 * time.Second}
	for _, e := range edit {
		e(&o)
	}
	c, err := qday.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func focus(s string) *capsule.Checkpoint { return &capsule.Checkpoint{Focus: &s} }

func write(seq uint64, cp *capsule.Checkpoint) capsule.Write {
	return capsule.Write{
		Seq: seq, Kind: capsule.WriteCheckpoint, Origin: capsule.OriginExplicit, At: time.Now(),
		IdempotencyKey: fmt.Sprintf("builder-%020d", seq), Checkpoint: cp,
	}
}

func asUpstreamError(t *testing.T, err error) *upstream.Error {
	t.Helper()
	var e *upstream.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *upstream.Error", err, err)
	}
	return e
}

func ctx(t *testing.T) context.Context { return t.Context() }

func TestNewValidates(t *testing.T) {
	bad := []struct {
		name string
		o    qday.Options
	}{
		{"no name", qday.Options{URL: "https://h", Token: staticToken(tok)}},
		{"no token", qday.Options{Name: "q", URL: "https://h"}},
		{"no url", qday.Options{Name: "q", Token: staticToken(tok)}},
		{"scheme", qday.Options{Name: "q", URL: "ftp://h", Token: staticToken(tok)}},
		{"no scheme", qday.Options{Name: "q", URL: "h.example/v1", Token: staticToken(tok)}},
		{"no host", qday.Options{Name: "q", URL: "https://", Token: staticToken(tok)}},
		{"port only", qday.Options{Name: "q", URL: "https://:443", Token: staticToken(tok)}},
		{"credentials", qday.Options{Name: "q", URL: "https://user:hunter2@h", Token: staticToken(tok)}},
		{"query", qday.Options{Name: "q", URL: "https://h/?token=x", Token: staticToken(tok)}},
		{"empty query", qday.Options{Name: "q", URL: "https://h/?", Token: staticToken(tok)}},
		{"fragment", qday.Options{Name: "q", URL: "https://h/#x", Token: staticToken(tok)}},
		{"bad port", qday.Options{Name: "q", URL: "https://h:99999", Token: staticToken(tok)}},
		{"unparsable", qday.Options{Name: "q", URL: "https://h\x7f/", Token: staticToken(tok)}},
		{"negative timeout", qday.Options{Name: "q", URL: "https://h", Token: staticToken(tok), Timeout: -time.Second}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c, err := qday.New(tc.o)
			if err == nil {
				t.Fatalf("New accepted %+v", tc.o)
			}
			if c != nil {
				t.Fatal("a client with an error")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error echoes a credential: %v", err)
			}
		})
	}
	for _, u := range []string{"https://h", "https://h/", "http://127.0.0.1:8080/prefix/", " https://H.example "} {
		if _, err := qday.New(qday.Options{Name: "q", URL: u, Token: staticToken(tok)}); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

func TestIdentity(t *testing.T) {
	c := newClient(t, "https://h")
	if c.Name() != "qday" || c.Kind() != qday.Kind || qday.Kind != "qday" {
		t.Fatalf("Name %q Kind %q", c.Name(), c.Kind())
	}
	for k, want := range map[capsule.WriteKind]bool{
		capsule.WriteCheckpoint: true, capsule.WriteCapsule: false, capsule.WriteSeal: false, capsule.WriteSessionEnd: false, "other": false,
	} {
		if c.Accepts(k) != want {
			t.Errorf("Accepts(%s) = %v", k, !want)
		}
	}
}

func TestDeliverSendsTheCheckpoint(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL()+"/", func(o *qday.Options) { o.UserAgent = "continuityd/test" })
	cp := &capsule.Checkpoint{
		Focus:        ptr("ship the parser"),
		WorkingState: &capsule.WorkingState{NextAction: ptr("run the tests"), ResultRef: capsule.NullableString{Set: true}},
		Decide:       &capsule.Decision{Chosen: "retry with backoff", Because: "the upstream drops bursts over sixty a minute"},
		PublicStatus: &capsule.PublicStatus{Phase: "acting", NextAction: "fixing the parser"},
		Commitments:  &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "ship it"}}},
	}
	w := write(7, cp)
	if err := c.Deliver(ctx(t), "builder", w); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	acc := s.Accepted()
	if len(acc) != 1 {
		t.Fatalf("accepted %d", len(acc))
	}
	r := acc[0]
	want, _ := json.Marshal(cp)
	if string(r.Body) != string(want) {
		t.Fatalf("body %s, want %s", r.Body, want)
	}
	if !strings.Contains(string(r.Body), `"result_ref":null`) {
		t.Fatalf("a cleared result_ref must travel as null: %s", r.Body)
	}
	for h, v := range map[string]string{
		"Authorization":   "Bearer " + tok,
		"Idempotency-Key": w.IdempotencyKey,
		"Content-Type":    "application/json",
		"Accept":          "application/json",
		"User-Agent":      "continuityd/test",
	} {
		if got := r.Header.Get(h); got != v {
			t.Errorf("%s = %q, want %q", h, got, v)
		}
	}
	if r.Method != http.MethodPost || r.Path != qday.CheckpointPath || r.IdempotencyKey != w.IdempotencyKey {
		t.Fatalf("recorded %s %s key %q", r.Method, r.Path, r.IdempotencyKey)
	}
}

func ptr(s string) *string { return &s }

// TestDeliverFaults runs every fault kind of the fake against the client:
// the *upstream.Error it must produce, then a retry of the same write,
// which must carry the same Idempotency-Key and go through.
func TestDeliverFaults(t *testing.T) {
	date := func() string { return time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat) }
	type want struct {
		delivered bool // Deliver returns nil
		applied   bool // the server applied it
		outcome   upstream.Outcome
		status    int
		code      string
		raMin     time.Duration
		raMax     time.Duration
	}
	cases := []struct {
		name  string
		opts  qdaytest.Options
		fault func() qdaytest.Fault
		want  want
	}{
		{"429 seconds", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED", raMin: time.Second, raMax: time.Second}},
		{"429 http-date", qdaytest.Options{RetryAfter: qdaytest.RetryAfterHTTPDate}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED", raMin: 0, raMax: 2 * time.Second}},
		{"429 none", qdaytest.Options{RetryAfter: qdaytest.RetryAfterNone}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED"}},
		{"429 seconds override", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429, RetryAfter: "7"} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED", raMin: 7 * time.Second, raMax: 7 * time.Second}},
		{"429 date override", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429, RetryAfter: date()} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED", raMin: 20 * time.Second, raMax: 30 * time.Second}},
		{"429 no retry-after", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status429, NoRetryAfter: true} },
			want{outcome: upstream.RateLimited, status: 429, code: "RATE_LIMITED"}},
		{"500", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status500} },
			want{outcome: upstream.Retry, status: 500, code: "INTERNAL"}},
		{"502", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status502} },
			want{outcome: upstream.Retry, status: 502, code: "BAD_GATEWAY"}},
		{"503", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status503} },
			want{outcome: upstream.Retry, status: 503, code: "UNAVAILABLE"}},
		{"503 retry-after", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status503, RetryAfter: "3"} },
			want{outcome: upstream.Retry, status: 503, code: "UNAVAILABLE", raMin: 3 * time.Second, raMax: 3 * time.Second}},
		{"garbage 500", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Garbage500} },
			want{outcome: upstream.Retry, status: 500}},
		{"reset", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Reset} },
			want{outcome: upstream.Retry}},
		{"401", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status401} },
			want{outcome: upstream.Unauthorized, status: 401, code: "UNAUTHORIZED"}},
		{"403", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status403} },
			want{outcome: upstream.Unauthorized, status: 403, code: "FORBIDDEN"}},
		{"409", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status409} },
			want{outcome: upstream.Stopped, status: 409, code: "RESIDENCY_STOPPED"}},
		{"400", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Status400} },
			want{outcome: upstream.Rejected, status: 400, code: "INVALID_PUBLIC_STATUS"}},
		{"slow", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Slow, Delay: 50 * time.Millisecond} },
			want{delivered: true, applied: true}},
		// The lying server: a 2xx is the server's word, so the client counts
		// the write delivered although nothing was saved.
		{"garbage 200", qdaytest.Options{}, func() qdaytest.Fault { return qdaytest.Fault{Kind: qdaytest.Garbage200} },
			want{delivered: true, applied: false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Token = tok
			s := newServer(t, tc.opts)
			c := newClient(t, s.URL())
			s.Script(tc.fault())
			w := write(1, focus("x"))
			err := c.Deliver(ctx(t), "builder", w)
			if got := len(s.Accepted()); (got == 1) != tc.want.applied {
				t.Fatalf("applied %d", got)
			}
			if tc.want.delivered {
				if err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				return
			}
			e := asUpstreamError(t, err)
			if e.Outcome != tc.want.outcome || e.Status != tc.want.status || e.Code != tc.want.code {
				t.Fatalf("got outcome %v status %d code %q (%v); want %v %d %q",
					e.Outcome, e.Status, e.Code, e, tc.want.outcome, tc.want.status, tc.want.code)
			}
			if e.RetryAfter < tc.want.raMin || e.RetryAfter > tc.want.raMax {
				t.Fatalf("RetryAfter %v, want %v..%v", e.RetryAfter, tc.want.raMin, tc.want.raMax)
			}
			if upstream.Classify(err) != tc.want.outcome {
				t.Fatal("Classify disagrees")
			}
			if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), `"focus"`) {
				t.Fatalf("error carries the token or the body: %v", err)
			}
			// The retry: same key, and this time it goes through.
			if err := c.Deliver(ctx(t), "builder", w); err != nil {
				t.Fatalf("retry: %v", err)
			}
			rs := s.Requests()
			if len(rs) != 2 || rs[0].IdempotencyKey != w.IdempotencyKey || rs[1].IdempotencyKey != w.IdempotencyKey {
				t.Fatalf("keys %+v, want both %q", rs, w.IdempotencyKey)
			}
			if len(s.Accepted()) != 1 {
				t.Fatal("the retry was not applied")
			}
		})
	}
}

func TestDeliverHangTimesOut(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	const timeout = 300 * time.Millisecond
	c := newClient(t, s.URL(), func(o *qday.Options) { o.Timeout = timeout })
	s.Script(qdaytest.Fault{Kind: qdaytest.Hang})
	start := time.Now()
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	elapsed := time.Since(start)
	e := asUpstreamError(t, err)
	if e.Outcome != upstream.Retry || e.Status != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v (outcome %v)", err, e.Outcome)
	}
	if elapsed < timeout || elapsed > timeout+10*time.Second { // generous: a loaded CI machine
		t.Fatalf("gave up after %v, want about %v", elapsed, timeout)
	}
	if err := c.Deliver(ctx(t), "builder", write(1, focus("x"))); err != nil {
		t.Fatalf("after the hang: %v", err)
	}
}

func TestDeliverCallerCancels(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	s.Script(qdaytest.Fault{Kind: qdaytest.Hang})
	cctx, cancel := context.WithCancel(ctx(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	err := c.Deliver(cctx, "builder", write(1, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Retry || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestDeliverConnectionRefused(t *testing.T) {
	s := qdaytest.New(qdaytest.Options{})
	url := s.URL()
	s.Close()
	c := newClient(t, url)
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	e := asUpstreamError(t, err)
	if e.Outcome != upstream.Retry || e.Status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v", err)
	}
}

func TestDeliverServerRules(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	// The client does not validate: the server's refusal is Rejected.
	err := c.Deliver(ctx(t), "builder", write(1, &capsule.Checkpoint{Decide: &capsule.Decision{Chosen: "a", Because: "short"}}))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Rejected || e.Status != 400 || e.Code != "MOTIVE_REQUIRED" {
		t.Fatalf("got %v", err)
	}
	// A stopped residency is Stopped until resume_residency.
	if err := c.Deliver(ctx(t), "builder", write(2, &capsule.Checkpoint{Stop: &capsule.Stop{Reason: "operator said stop"}})); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for seq := uint64(3); seq < 5; seq++ {
		err := c.Deliver(ctx(t), "builder", write(seq, focus("while stopped")))
		if e := asUpstreamError(t, err); e.Outcome != upstream.Stopped || e.Status != 409 || e.Code != capsule.CodeResidencyStopped {
			t.Fatalf("while stopped: %v", err)
		}
	}
	resume := focus("back at work")
	resume.ResumeResidency = true
	if err := c.Deliver(ctx(t), "builder", write(5, resume)); err != nil {
		t.Fatalf("resume_residency: %v", err)
	}
	if err := c.Deliver(ctx(t), "builder", write(6, focus("after"))); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	if s.Stopped(tok) {
		t.Fatal("still stopped")
	}
}

func TestDeliverRefusesOtherWrites(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	for _, w := range []capsule.Write{
		{Seq: 1, Kind: capsule.WriteCapsule, IdempotencyKey: "k1", Capsule: &capsule.Capsule{}},
		{Seq: 2, Kind: capsule.WriteCheckpoint, IdempotencyKey: "k2"},
	} {
		err := c.Deliver(ctx(t), "builder", w)
		if e := asUpstreamError(t, err); e.Outcome != upstream.Rejected {
			t.Fatalf("%s: got %v", w.Kind, err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

func TestTokenIsReadOnEveryCall(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: "second"})
	var cur atomic.Value
	cur.Store("first")
	var calls atomic.Int32
	c := newClient(t, s.URL(), func(o *qday.Options) {
		o.Token = func() (string, error) { calls.Add(1); return cur.Load().(string), nil }
	})
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Unauthorized || e.Status != 401 || e.Code != "UNAUTHORIZED" {
		t.Fatalf("with the old token: %v", err)
	}
	cur.Store(" second\n") // a reloaded token file, with its newline
	if err := c.Deliver(ctx(t), "builder", write(1, focus("x"))); err != nil {
		t.Fatalf("with the new token: %v", err)
	}
	if _, err := c.Resume(ctx(t), "builder"); err != nil {
		t.Fatalf("Resume with the new token: %v", err)
	}
	rs := s.Requests()
	if len(rs) != 3 || rs[0].Header.Get("Authorization") != "Bearer first" ||
		rs[1].Header.Get("Authorization") != "Bearer second" || rs[2].Header.Get("Authorization") != "Bearer second" {
		t.Fatalf("authorization headers: %q %q", rs[0].Header.Get("Authorization"), rs[1].Header.Get("Authorization"))
	}
	if calls.Load() != 3 {
		t.Fatalf("token read %d times for 3 calls", calls.Load())
	}
}

func TestTokenProblemsAreUnauthorized(t *testing.T) {
	s := newServer(t, qdaytest.Options{})
	cases := []struct {
		name  string
		token func() (string, error)
	}{
		{"error", func() (string, error) { return "", errors.New("open /etc/continuityd/qday.token: permission denied") }},
		{"empty", staticToken("")},
		{"blank", staticToken(" \n")},
		{"inner newline", staticToken("abc\r\nX-Evil: 1")},
		{"inner space", staticToken("abc def")},
		{"non-ascii", staticToken("abcé")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, s.URL(), func(o *qday.Options) { o.Token = tc.token })
			checks := []error{c.Deliver(ctx(t), "builder", write(1, focus("x")))}
			_, err := c.Resume(ctx(t), "builder")
			checks = append(checks, err)
			_, err = c.Wait(ctx(t), "builder", 1)
			checks = append(checks, err)
			for _, err := range checks {
				e := asUpstreamError(t, err)
				if e.Outcome != upstream.Unauthorized || e.Status != 0 {
					t.Fatalf("got %v", err)
				}
				if strings.Contains(err.Error(), "abc") {
					t.Fatalf("error echoes the token: %v", err)
				}
			}
		})
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests sent without a usable token", n)
	}
}

func TestResume(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	if err := c.Deliver(ctx(t), "builder", write(1, focus("the parser"))); err != nil {
		t.Fatal(err)
	}
	s.SetDirections(json.RawMessage(`{"id":"d1"}`))
	raw, err := c.Resume(ctx(t), "builder")
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	var r struct {
		Focus      string            `json:"focus"`
		Directions []json.RawMessage `json:"directions"`
		Degraded   []string          `json:"degraded"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Focus != "the parser" || len(r.Directions) != 1 || r.Degraded == nil {
		t.Fatalf("resume %s: %v", raw, err)
	}
	rq := s.Requests()[1]
	if rq.Method != http.MethodGet || rq.Path != qday.ResumePath || rq.Header.Get("Authorization") != "Bearer "+tok ||
		rq.Header.Get("Accept") != "application/json" || rq.Header.Get("Content-Type") != "" || rq.IdempotencyKey != "" {
		t.Fatalf("recorded %+v", rq)
	}

	// Faults classify the same way as for Deliver; a 200 that is not a
	// JSON object is an error here, since the caller needs the body.
	for _, f := range []struct {
		fault   qdaytest.Fault
		outcome upstream.Outcome
		status  int
	}{
		{qdaytest.Fault{Kind: qdaytest.Status429}, upstream.RateLimited, 429},
		{qdaytest.Fault{Kind: qdaytest.Status403}, upstream.Unauthorized, 403},
		{qdaytest.Fault{Kind: qdaytest.Garbage200}, upstream.Retry, 200},
		{qdaytest.Fault{Kind: qdaytest.Garbage500}, upstream.Retry, 500},
	} {
		s.Script(f.fault)
		raw, err := c.Resume(ctx(t), "builder")
		if raw != nil {
			t.Fatalf("%s: a body with an error", f.fault.Kind)
		}
		if e := asUpstreamError(t, err); e.Outcome != f.outcome || e.Status != f.status {
			t.Fatalf("%s: got %v", f.fault.Kind, err)
		}
	}
}

func TestWait(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, TimeScale: 0.02})
	// Options.Timeout does not bound a wait: max_seconds+15s does.
	c := newClient(t, s.URL(), func(o *qday.Options) { o.Timeout = 20 * time.Millisecond })

	start := time.Now()
	raw, err := c.Wait(ctx(t), "builder", 5) // 100ms at this scale
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var r struct {
		Woke   string            `json:"woke"`
		Events []json.RawMessage `json:"events"`
		Scope  string            `json:"directions_scope"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Woke != "timeout" || r.Scope != "inbox_and_commitments_only" {
		t.Fatalf("timeout answer %s: %v", raw, err)
	}
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Fatalf("woke after %v", el)
	}

	// Woken by an event.
	done := make(chan error, 1)
	go func() {
		raw, err := c.Wait(ctx(t), "builder", 90)
		if err == nil && !strings.Contains(string(raw), `"woke":"event"`) {
			err = fmt.Errorf("answer %s", raw)
		}
		if err == nil && !strings.Contains(string(raw), `"id":"e1"`) {
			err = fmt.Errorf("answer lacks the event: %s", raw)
		}
		done <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) == 2 })
	s.PushEvent(json.RawMessage(`{"kind":"inbox","id":"e1"}`))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the event did not wake the wait")
	}

	// max_seconds is clamped to 1..90.
	for _, tc := range []struct{ in, sent int }{{0, 1}, {-3, 1}, {1, 1}, {90, 90}, {500, 90}} {
		s.PushEvent(json.RawMessage(`{}`)) // answer at once
		if _, err := c.Wait(ctx(t), "builder", tc.in); err != nil {
			t.Fatalf("Wait(%d): %v", tc.in, err)
		}
		rs := s.Requests()
		if q := rs[len(rs)-1].Query; q != fmt.Sprintf("max_seconds=%d", tc.sent) {
			t.Fatalf("Wait(%d) sent %q", tc.in, q)
		}
	}

	// net/http replays a GET (and a request with an Idempotency-Key) once
	// when a reused connection fails before the answer; a fresh connection
	// shows the reset itself.
	c.CloseIdleConnections()
	s.Script(qdaytest.Fault{Kind: qdaytest.Reset})
	if _, err := c.Wait(ctx(t), "builder", 1); upstream.Classify(err) != upstream.Retry || err == nil {
		t.Fatalf("reset during a wait: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 60 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRateLimit(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, Rate: 0.5, Burst: 2}) // a token every 2 s
	c := newClient(t, s.URL())
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.Deliver(ctx(t), "builder", write(seq, focus("x"))); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Deliver(ctx(t), "builder", write(3, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.RateLimited || e.Status != 429 ||
		e.RetryAfter < time.Second || e.RetryAfter > 2*time.Second {
		t.Fatalf("over the limit: %v (retry after %v)", err, asUpstreamError(t, err).RetryAfter)
	}
	if n := len(s.Accepted()); n != 2 {
		t.Fatalf("accepted %d", n)
	}
}

// TestPacedDeliveryHonoursRetryAfter plays a tiny outbox: writes in order,
// paced under the server's rate, waiting out Retry-After when told to.
func TestPacedDeliveryHonoursRetryAfter(t *testing.T) {
	const rate, burst = 10.0, 2
	s := newServer(t, qdaytest.Options{Token: tok, Rate: rate, Burst: burst})
	c := newClient(t, s.URL())
	s.Script(qdaytest.Fault{Kind: qdaytest.Status429, RetryAfter: "1"}) // one 429 on the way
	tick := time.NewTicker(time.Second / 8)
	defer tick.Stop()
	var waited time.Duration
	for seq := uint64(1); seq <= 6; seq++ {
		w := write(seq, focus(fmt.Sprintf("step %d", seq)))
		for {
			<-tick.C
			err := c.Deliver(ctx(t), "builder", w)
			if err == nil {
				break
			}
			e := asUpstreamError(t, err)
			if e.Outcome != upstream.RateLimited {
				t.Fatalf("seq %d: %v", seq, err)
			}
			waited += e.RetryAfter
			// A client obeys Retry-After: this sleep is the pacing the
			// fake's rule asks for, not a wait for something to happen.
			time.Sleep(e.RetryAfter)
		}
	}
	if waited < time.Second {
		t.Fatalf("waited %v for Retry-After, want at least the scripted 1s", waited)
	}
	acc := s.Accepted()
	if len(acc) != 6 {
		t.Fatalf("accepted %d", len(acc))
	}
	for i, r := range acc {
		if want := fmt.Sprintf("builder-%020d", i+1); r.IdempotencyKey != want {
			t.Fatalf("accepted out of order: %d is %s", i, r.IdempotencyKey)
		}
	}
	if got, limit := s.MaxInWindow(time.Second), int(rate)+burst; got > limit {
		t.Fatalf("MaxInWindow(1s) = %d > %d", got, limit)
	}
}

func TestConcurrentDeliveries(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				if err := c.Deliver(ctx(t), "builder", write(uint64(g*100+i), focus("x"))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(s.Accepted()); n != 40 {
		t.Fatalf("accepted %d", n)
	}
}

// rawServer is an httptest server with a handler of the test's own, for
// answers the fake does not give.
func rawServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func TestAnswerSizeIsBounded(t *testing.T) {
	huge := `{"pad":"` + strings.Repeat("x", qday.MaxAnswerBytes+10) + `"}`
	status := atomic.Int32{}
	ts := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(huge))
	})
	c := newClient(t, ts.URL)

	status.Store(200)
	if _, err := c.Resume(ctx(t), "builder"); upstream.Classify(err) != upstream.Retry || err == nil ||
		!strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Resume of a huge answer: %v", err)
	}
	// A 2xx to a checkpoint is delivered whatever its body.
	if err := c.Deliver(ctx(t), "builder", write(1, focus("x"))); err != nil {
		t.Fatalf("Deliver with a huge 200: %v", err)
	}
	status.Store(500)
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Retry || e.Status != 500 {
		t.Fatalf("Deliver with a huge 500: %v", err)
	}
	status.Store(400)
	err = c.Deliver(ctx(t), "builder", write(1, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Rejected || e.Status != 400 {
		t.Fatalf("Deliver with a huge 400: %v", err)
	}
}

func TestNonObjectAnswers(t *testing.T) {
	body := atomic.Value{}
	ts := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body.Load().(string)))
	})
	c := newClient(t, ts.URL)
	for _, b := range []string{``, `[]`, `"x"`, `null`, `{"a":1`, `{"a":1} {}`, `<html>`} {
		body.Store(b)
		raw, err := c.Resume(ctx(t), "builder")
		if err == nil || raw != nil || upstream.Classify(err) != upstream.Retry {
			t.Errorf("Resume of %q: %s, %v", b, raw, err)
		}
		if _, err := c.Wait(ctx(t), "builder", 1); err == nil {
			t.Errorf("Wait of %q: no error", b)
		}
	}
	body.Store(" {\"woke\":\"timeout\"}\n")
	raw, err := c.Wait(ctx(t), "builder", 1)
	if err != nil || string(raw) != `{"woke":"timeout"}` {
		t.Fatalf("Wait: %q %v", raw, err)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var hits atomic.Int32
	elsewhere := rawServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	ts := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	c := newClient(t, ts.URL)
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	if e := asUpstreamError(t, err); e.Outcome != upstream.Retry || e.Status != 307 {
		t.Fatalf("got %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestBasePathPrefix(t *testing.T) {
	var paths sync.Map
	ts := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path, true)
		_, _ = w.Write([]byte(`{}`))
	})
	c := newClient(t, ts.URL+"/api/qday/")
	if err := c.Deliver(ctx(t), "builder", write(1, focus("x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx(t), "builder"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/qday" + qday.CheckpointPath, "/api/qday" + qday.ResumePath} {
		if _, ok := paths.Load(p); !ok {
			t.Errorf("no request to %s", p)
		}
	}
}

func TestErrorsNeverCarryTheToken(t *testing.T) {
	const plain = "plainwordsecret" // no digits: only the client's own scrub catches it
	ts := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		msg := fmt.Sprintf("refused %s (%s)", strings.TrimPrefix(auth, "Bearer "), auth)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "BAD", "message": msg}})
	})
	c := newClient(t, ts.URL, func(o *qday.Options) { o.Token = staticToken(plain) })
	err := c.Deliver(ctx(t), "builder", write(1, focus("x")))
	e := asUpstreamError(t, err)
	if e.Outcome != upstream.Rejected || strings.Contains(err.Error(), plain) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "refused [redacted]") {
		t.Fatalf("message lost its shape: %v", err)
	}
}

// TestTransportReplayKeepsTheKey: net/http replays a request that carries
// an Idempotency-Key once when a reused connection dies before the answer.
// The server then sees the write twice under the same key, which is the
// at-least-once contract, never two keys for one write.
func TestTransportReplayKeepsTheKey(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	c := newClient(t, s.URL())
	if err := c.Deliver(ctx(t), "builder", write(1, focus("warm the connection"))); err != nil {
		t.Fatal(err)
	}
	s.Script(qdaytest.Fault{Kind: qdaytest.Reset})
	w := write(2, focus("x"))
	err := c.Deliver(ctx(t), "builder", w)
	rs := s.Requests()
	switch len(rs) {
	case 3: // replayed on a new connection and applied
		if err != nil || rs[1].IdempotencyKey != w.IdempotencyKey || rs[2].IdempotencyKey != w.IdempotencyKey || !rs[2].Applied {
			t.Fatalf("replay: %v %+v", err, rs)
		}
	case 2: // the connection was not reused after all: the reset shows
		if upstream.Classify(err) != upstream.Retry || err == nil {
			t.Fatalf("reset: %v", err)
		}
	default:
		t.Fatalf("%d requests", len(rs))
	}
}

// TestRootCAsPinTheServersCA: with RootCAs (ca_file) a server whose CA is
// not the system's is reached; without, its certificate is refused.
func TestRootCAsPinTheServersCA(t *testing.T) {
	fake := qdaytest.New(qdaytest.Options{Token: "tok-0123456789"})
	defer fake.Close()
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for _, c := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{{"system CAs", nil, false}, {"ca_file", pool, true}} {
		cl, err := qday.New(qday.Options{Name: "q", URL: srv.URL, Token: staticToken("tok-0123456789"), RootCAs: c.roots})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Resume(context.Background(), "a")
		if (err == nil) != c.ok {
			t.Errorf("%s: Resume over TLS: %v", c.name, err)
		}
		cl.CloseIdleConnections()
	}
}
