package qdaytest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/upstream/qdaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tok = "test-token"

const goodUUID = "6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7b"

// newServer starts a server closed at the end of the test.
func newServer(t *testing.T, o qdaytest.Options) *qdaytest.Server {
	t.Helper()
	s := qdaytest.New(o)
	t.Cleanup(s.Close)
	return s
}

// httpClient makes one new connection per request, so the transport never
// replays a request on its own (it does for idempotent requests on a
// reused connection) and a test sees exactly the requests it sent.
func httpClient(t *testing.T, timeout time.Duration) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// code is the error code of the answer, "" when it has none.
func (a answer) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func (a answer) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %q", err, a.body)
	}
	return m
}

// do sends a request; token "" sends no Authorization.
func do(t *testing.T, hc *http.Client, s *qdaytest.Server, method, path, token, body string) (answer, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", "k-"+method)
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}, err
}

// must is do that fails the test on a transport error.
func must(t *testing.T, hc *http.Client, s *qdaytest.Server, method, path, token, body string) answer {
	t.Helper()
	a, err := do(t, hc, s, method, path, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

func checkpoint(t *testing.T, hc *http.Client, s *qdaytest.Server, token, body string) answer {
	t.Helper()
	return must(t, hc, s, http.MethodPost, qdaytest.CheckpointPath, token, body)
}

func wantStatus(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.code() != code {
		t.Fatalf("got %d %q (%s), want %d %q", a.status, a.code(), a.body, status, code)
	}
}

func TestAuth(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	for _, path := range []string{qdaytest.ResumePath, qdaytest.WaitPath + "?max_seconds=1"} {
		a := must(t, hc, s, http.MethodGet, path, "", "")
		wantStatus(t, a, 401, "UNAUTHORIZED")
		if a.header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		wantStatus(t, must(t, hc, s, http.MethodGet, path, "wrong", ""), 401, "UNAUTHORIZED")
	}
	wantStatus(t, checkpoint(t, hc, s, "", `{"focus":"x"}`), 401, "UNAUTHORIZED")
	wantStatus(t, checkpoint(t, hc, s, tok+"x", `{"focus":"x"}`), 401, "UNAUTHORIZED")

	// Another scheme is not a bearer token.
	req, _ := http.NewRequest(http.MethodGet, s.URL()+qdaytest.ResumePath, nil)
	req.SetBasicAuth("u", tok)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("basic auth: %d", resp.StatusCode)
	}

	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 200, "")
	if n := len(s.Accepted()); n != 0 {
		t.Fatalf("%d accepted after refused checkpoints", n)
	}

	// Token "" accepts any bearer token, not none.
	anyTok := newServer(t, qdaytest.Options{})
	wantStatus(t, must(t, hc, anyTok, http.MethodGet, qdaytest.ResumePath, "whatever", ""), 200, "")
	wantStatus(t, must(t, hc, anyTok, http.MethodGet, qdaytest.ResumePath, "", ""), 401, "UNAUTHORIZED")
}

func TestRoutes(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	wantStatus(t, must(t, hc, s, http.MethodGet, "/v1/nope", tok, ""), 404, "NOT_FOUND")
	a := must(t, hc, s, http.MethodGet, qdaytest.CheckpointPath, tok, "")
	wantStatus(t, a, 405, "METHOD_NOT_ALLOWED")
	if a.header.Get("Allow") != http.MethodPost {
		t.Fatalf("Allow = %q", a.header.Get("Allow"))
	}
	wantStatus(t, must(t, hc, s, http.MethodPost, qdaytest.ResumePath, tok, `{}`), 405, "METHOD_NOT_ALLOWED")
	big := `{"focus":"` + strings.Repeat("a", qdaytest.MaxRequestBytes) + `"}`
	wantStatus(t, checkpoint(t, hc, s, tok, big), 413, "BODY_TOO_LARGE")
}

func TestCheckpointRules(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	opens := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"title":"loop %d"}`, i))
		}
		return `{"commitments":{"open":[` + strings.Join(parts, ",") + `]}}`
	}
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not json", `{focus:`, 400, "INVALID_JSON"},
		{"empty", `{}`, 400, "EMPTY_CHECKPOINT"},
		{"unknown field", `{"focus":"x","mood":"good"}`, 400, "UNKNOWN_FIELD"},
		{"status with an email", `{"public_status":{"phase":"acting","next_action":"write to a@example.com"}}`, 400, "INVALID_PUBLIC_STATUS"},
		{"status links elsewhere", `{"public_status":{"phase":"acting","next_action":"see https://evil.example/x"}}`, 400, "INVALID_PUBLIC_STATUS"},
		{"status without phase", `{"public_status":{"next_action":"x"}}`, 400, "INVALID_PUBLIC_STATUS"},
		{"short because", `{"decide":{"chosen":"a","because":"too short"}}`, 400, "MOTIVE_REQUIRED"},
		{"bad working state", `{"working_state":{"next_action":5}}`, 400, "INVALID_WORKING_STATE"},
		{"thirteen opens", opens(13), 400, "TOO_MANY_OPEN_LOOPS"},
		{"close without evidence", `{"commitments":{"close":[{"id":"c_1"}]}}`, 400, "EVIDENCE_REQUIRED"},
		{"good", `{"focus":"ship the parser","public_status":{"phase":"acting","next_action":"fixing the parser"}}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := checkpoint(t, hc, s, tok, tc.body)
			wantStatus(t, a, tc.status, tc.code)
			if tc.status == 200 && a.object(t)["saved"] != true {
				t.Fatalf("no saved state: %s", a.body)
			}
		})
	}
	if n := len(s.Accepted()); n != 1 {
		t.Fatalf("accepted %d, want only the good one", n)
	}
}

func TestOpenLoopsAcrossCheckpoints(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	open := func(from, n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"title":"loop %d"}`, from+i))
		}
		return `{"commitments":{"open":[` + strings.Join(parts, ",") + `]}}`
	}
	a := checkpoint(t, hc, s, tok, open(0, 10))
	wantStatus(t, a, 200, "")
	ids := func(a answer) []string {
		var v struct {
			Commitments []struct{ ID string } `json:"commitments"`
		}
		if err := json.Unmarshal(a.body, &v); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range v.Commitments {
			out = append(out, c.ID)
		}
		return out
	}
	if n := len(ids(a)); n != 10 {
		t.Fatalf("%d open, want 10", n)
	}
	wantStatus(t, checkpoint(t, hc, s, tok, open(10, 3)), 400, "TOO_MANY_OPEN_LOOPS")
	a = checkpoint(t, hc, s, tok, open(10, 2))
	wantStatus(t, a, 200, "")
	open12 := ids(a)
	if len(open12) != 12 {
		t.Fatalf("%d open, want 12", len(open12))
	}
	wantStatus(t, checkpoint(t, hc, s, tok, open(12, 1)), 400, "TOO_MANY_OPEN_LOOPS")
	// Closing one makes room in the same call.
	a = checkpoint(t, hc, s, tok, fmt.Sprintf(
		`{"commitments":{"close":[{"id":%q,"evidence":"post:%s"}],"open":[{"title":"the new one"}]}}`, open12[0], goodUUID))
	wantStatus(t, a, 200, "")
	wantStatus(t, checkpoint(t, hc, s, tok, `{"commitments":{"close":[{"id":"c_999","evidence":"post:`+goodUUID+`"}]}}`),
		400, "UNKNOWN_COMMITMENT")
	wantStatus(t, checkpoint(t, hc, s, tok, fmt.Sprintf(`{"commitments":{"drop":[{"id":%q,"reason":"superseded by the plan"}]}}`, open12[1])),
		200, "")
	// A closed commitment cannot be closed again.
	wantStatus(t, checkpoint(t, hc, s, tok, fmt.Sprintf(`{"commitments":{"drop":[{"id":%q,"reason":"superseded by the plan"}]}}`, open12[0])),
		400, "UNKNOWN_COMMITMENT")
	a = must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "")
	if n := len(ids(a)); n != 11 {
		t.Fatalf("resume shows %d open, want 11", n)
	}
}

func TestStopAndResumeResidency(t *testing.T) {
	s := newServer(t, qdaytest.Options{})
	hc := httpClient(t, 20*time.Second)
	wantStatus(t, checkpoint(t, hc, s, "a", `{"focus":"before"}`), 200, "")
	wantStatus(t, checkpoint(t, hc, s, "a", `{"stop":{"reason":"operator said stop"},"focus":"ignored"}`), 200, "")
	if !s.Stopped("a") {
		t.Fatal("not stopped")
	}
	wantStatus(t, checkpoint(t, hc, s, "a", `{"focus":"after"}`), 409, "RESIDENCY_STOPPED")
	wantStatus(t, checkpoint(t, hc, s, "a", `{"stop":{"reason":"again"}}`), 409, "RESIDENCY_STOPPED")
	// Another token has its own residency.
	wantStatus(t, checkpoint(t, hc, s, "b", `{"focus":"other"}`), 200, "")
	// Resume still answers, and shows the stop; the stop kept the focus.
	r := must(t, hc, s, http.MethodGet, qdaytest.ResumePath, "a", "").object(t)
	if r["focus"] != "before" || r["residency"].(map[string]any)["stopped"] != true {
		t.Fatalf("resume: %v", r)
	}
	wantStatus(t, checkpoint(t, hc, s, "a", `{"resume_residency":true,"focus":"after"}`), 200, "")
	if s.Stopped("a") {
		t.Fatal("still stopped")
	}
	wantStatus(t, checkpoint(t, hc, s, "a", `{"focus":"later"}`), 200, "")
	if n := len(s.Accepted()); n != 5 {
		t.Fatalf("accepted %d, want 5", n)
	}
}

func TestResumeDocument(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	r := must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "").object(t)
	for _, k := range []string{"focus", "working_state", "commitments", "decisions", "recent_publications", "directions", "degraded", "public_status"} {
		if _, ok := r[k]; !ok {
			t.Errorf("fresh resume lacks %q: %v", k, r)
		}
	}
	if d, _ := r["directions"].([]any); d == nil || len(d) != 0 {
		t.Errorf("directions = %v, want []", r["directions"])
	}

	wantStatus(t, checkpoint(t, hc, s, tok, `{"focus":"parser","working_state":{"next_action":"run tests","result_ref":"run/42"},`+
		`"decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute"},`+
		`"public_status":{"phase":"acting","next_action":"fixing the parser"}}`), 200, "")
	wantStatus(t, checkpoint(t, hc, s, tok, `{"working_state":{"result_ref":null,"last_result":"green"}}`), 200, "")
	s.SetDirections(json.RawMessage(`{"id":"d1","text":"look at the board"}`))

	r = must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "").object(t)
	if r["focus"] != "parser" {
		t.Errorf("focus = %v", r["focus"])
	}
	ws := r["working_state"].(map[string]any)
	if ws["next_action"] != "run tests" || ws["last_result"] != "green" || ws["result_ref"] != nil || ws["updated_at"] == nil {
		t.Errorf("working_state = %v", ws)
	}
	if d := r["decisions"].([]any); len(d) != 1 || d[0].(map[string]any)["chosen"] != "retry with backoff" {
		t.Errorf("decisions = %v", d)
	}
	if ps := r["public_status"].(map[string]any); ps["phase"] != "acting" || ps["updated_at"] == nil {
		t.Errorf("public_status = %v", ps)
	}
	if d := r["directions"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != "d1" {
		t.Errorf("directions = %v", d)
	}
	if p := r["recent_publications"].([]any); len(p) != 0 {
		t.Errorf("recent_publications = %v", p)
	}
	if d := r["degraded"].([]any); len(d) != 0 {
		t.Errorf("degraded = %v", d)
	}
}

func TestWait(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, TimeScale: 0.01})
	hc := httpClient(t, 20*time.Second)
	wait := func(q string) answer { return must(t, hc, s, http.MethodGet, qdaytest.WaitPath+q, tok, "") }

	for _, q := range []string{"?max_seconds=0", "?max_seconds=91", "?max_seconds=x", "?max_seconds=-1", "?max_seconds=1.5", "?max_seconds="} {
		wantStatus(t, wait(q), 400, "INVALID_QUERY")
	}

	// Timeout: 5 s × 0.01.
	start := time.Now()
	r := wait("?max_seconds=5").object(t)
	if r["woke"] != "timeout" || r["directions_scope"] != "inbox_and_commitments_only" {
		t.Fatalf("timeout answer: %v", r)
	}
	if el := time.Since(start); el < 40*time.Millisecond || el > 15*time.Second {
		t.Fatalf("timed out after %v, want about 50ms", el)
	}
	// The default is 20 s (200ms here).
	start = time.Now()
	if r := wait("").object(t); r["woke"] != "timeout" {
		t.Fatalf("default wait: %v", r)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("default wait took %v, want about 200ms", el)
	}

	// Events queued before a wait are answered at once.
	s.PushEvent(json.RawMessage(`{"kind":"inbox","id":1}`))
	s.PushEvent(json.RawMessage(`{"kind":"inbox","id":2}`))
	r = wait("?max_seconds=90").object(t)
	if r["woke"] != "event" || len(r["events"].([]any)) != 2 {
		t.Fatalf("queued events: %v", r)
	}

	// An event pushed during a wait wakes it.
	slow := newServer(t, qdaytest.Options{Token: tok})
	done := make(chan answer, 1)
	go func() {
		a, _ := do(t, hc, slow, http.MethodGet, qdaytest.WaitPath+"?max_seconds=30", tok, "")
		done <- a
	}()
	waitFor(t, func() bool { return len(slow.Requests()) == 1 })
	start = time.Now()
	slow.PushEvent(json.RawMessage(`{"kind":"commitment","id":"c_1"}`))
	select {
	case a := <-done:
		r := a.object(t)
		if r["woke"] != "event" || r["events"].([]any)[0].(map[string]any)["id"] != "c_1" {
			t.Fatalf("woken answer: %v", r)
		}
		if el := time.Since(start); el > 15*time.Second {
			t.Fatalf("woke after %v", el)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("PushEvent did not wake the wait")
	}
}

// waitFor polls cond for up to 60 s.
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
	// Rate 0.5: a token every 2 s, so a loaded machine that stalls between
	// the requests below does not refill the bucket under the test.
	for _, form := range []string{"", qdaytest.RetryAfterSeconds, qdaytest.RetryAfterHTTPDate, qdaytest.RetryAfterNone} {
		t.Run("form="+form, func(t *testing.T) {
			s := newServer(t, qdaytest.Options{Rate: 0.5, Burst: 2, RetryAfter: form})
			hc := httpClient(t, 20*time.Second)
			wantStatus(t, checkpoint(t, hc, s, "a", `{"focus":"1"}`), 200, "")
			wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, "a", ""), 200, "") // every endpoint counts
			start := time.Now()
			a := checkpoint(t, hc, s, "a", `{"focus":"3"}`)
			wantStatus(t, a, 429, "RATE_LIMITED")
			ra := a.header.Get("Retry-After")
			switch form {
			case "", qdaytest.RetryAfterSeconds:
				if ra != "2" && ra != "1" { // up to 2 s, rounded up
					t.Fatalf("Retry-After = %q, want 2 (or 1 on a slow machine)", ra)
				}
			case qdaytest.RetryAfterHTTPDate:
				at, err := http.ParseTime(ra)
				if err != nil {
					t.Fatalf("Retry-After %q is not an HTTP-date: %v", ra, err)
				}
				if d := at.Sub(start); d <= 0 || d > 10*time.Second {
					t.Fatalf("Retry-After is %v ahead, want (0, 3s] (10s on a loaded machine)", d)
				}
			case qdaytest.RetryAfterNone:
				if _, ok := a.header["Retry-After"]; ok {
					t.Fatalf("Retry-After = %q, want none", ra)
				}
			}
			// Another token has its own bucket.
			wantStatus(t, checkpoint(t, hc, s, "b", `{"focus":"b"}`), 200, "")
			if n := len(s.Accepted()); n != 2 {
				t.Fatalf("accepted %d, want 2: the limited one is not applied", n)
			}
		})
	}
}

func TestRateLimitRefills(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, Rate: 4, Burst: 1})
	hc := httpClient(t, 20*time.Second)
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 200, "")
	// The bucket refills with time: letting more than 1/Rate pass is what
	// is tested (a slower machine only lets more pass).
	time.Sleep(300 * time.Millisecond)
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 200, "")
}

func TestRateLimitRoundsUp(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, Rate: 0.2, Burst: 1}) // one per 5 s
	hc := httpClient(t, 20*time.Second)
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 200, "")
	a := must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "")
	wantStatus(t, a, 429, "RATE_LIMITED")
	if ra := a.header.Get("Retry-After"); ra != "5" && ra != "4" {
		t.Fatalf("Retry-After = %q, want 5 (a little under 5 s, rounded up; 4 on a loaded machine)", ra)
	}
}

func TestHammerIsLimited(t *testing.T) {
	const rate, burst = 5.0, 3 // low, so even a loaded machine outpaces it
	s := newServer(t, qdaytest.Options{Token: tok, Rate: rate, Burst: burst})
	hc := httpClient(t, 20*time.Second)
	start := time.Now()
	var mu sync.Mutex
	admitted, limited := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 15 {
				a := must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "")
				mu.Lock()
				if a.status == 200 {
					admitted++
				} else if a.status == 429 {
					limited++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if admitted+limited != 60 {
		t.Fatalf("admitted %d + limited %d != 60", admitted, limited)
	}
	if max := int(rate*elapsed.Seconds()) + burst + 1; admitted > max {
		t.Fatalf("admitted %d in %v; the bucket allows at most %d", admitted, elapsed, max)
	}
	if limited == 0 {
		t.Fatal("no 429 under a hammer")
	}
	if got := s.MaxInWindow(time.Hour); got != 60 {
		t.Fatalf("MaxInWindow counts every request: %d, want 60", got)
	}
}

func TestPacedClientStaysWithinWindow(t *testing.T) {
	const rate, burst = 20.0, 3
	s := newServer(t, qdaytest.Options{Token: tok, Rate: rate, Burst: burst})
	hc := httpClient(t, 20*time.Second)
	tick := time.NewTicker(time.Second / 12) // well under the rate: a loaded machine delays some requests
	defer tick.Stop()
	for i := range 12 {
		<-tick.C
		wantStatus(t, checkpoint(t, hc, s, tok, fmt.Sprintf(`{"focus":"step %d"}`, i)), 200, "")
	}
	window := 250 * time.Millisecond
	if got, limit := s.MaxInWindow(window), int(rate*window.Seconds())+burst; got > limit || got < 1 {
		t.Fatalf("MaxInWindow(%v) = %d, want 1..%d", window, got, limit)
	}
	if n := len(s.Accepted()); n != 12 {
		t.Fatalf("accepted %d, want 12", n)
	}
}

func TestRecordsRequests(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)
	body := `{"focus":"recorded"}`
	checkpoint(t, hc, s, tok, body)
	must(t, hc, s, http.MethodGet, qdaytest.WaitPath+"?max_seconds=1", "", "")
	rs := s.Requests()
	if len(rs) != 2 {
		t.Fatalf("%d requests", len(rs))
	}
	r := rs[0]
	if r.Method != "POST" || r.Path != qdaytest.CheckpointPath || string(r.Body) != body || r.IdempotencyKey != "k-POST" ||
		r.Status != 200 || r.Fault != "" || !r.Applied || r.Header.Get("Authorization") != "Bearer "+tok ||
		r.Header.Get("Content-Type") != "application/json" || r.At.IsZero() {
		t.Fatalf("recorded %+v", r)
	}
	if r := rs[1]; r.Path != qdaytest.WaitPath || r.Query != "max_seconds=1" || r.Status != 401 || r.Applied {
		t.Fatalf("recorded %+v", r)
	}
	if !rs[1].At.After(rs[0].At) && !rs[1].At.Equal(rs[0].At) {
		t.Fatal("requests out of order")
	}
	// Copies: changing one does not change the record.
	rs[0].Body[0] = 'X'
	rs[0].Header.Set("Authorization", "changed")
	if r := s.Requests()[0]; r.Body[0] != '{' || r.Header.Get("Authorization") != "Bearer "+tok {
		t.Fatal("Requests returned the server's own slices")
	}
	if a := s.Accepted(); len(a) != 1 || string(a[0].Body) != body {
		t.Fatalf("accepted %+v", a)
	}
}

func TestScriptedFaults(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		opts       qdaytest.Options
		fault      qdaytest.Fault
		status     int
		code       string
		retryAfter string // "" none, "*" any
		notJSON    bool
	}{
		{name: "400", fault: qdaytest.Fault{Kind: qdaytest.Status400}, status: 400, code: "INVALID_PUBLIC_STATUS"},
		{name: "401", fault: qdaytest.Fault{Kind: qdaytest.Status401}, status: 401, code: "UNAUTHORIZED"},
		{name: "403", fault: qdaytest.Fault{Kind: qdaytest.Status403}, status: 403, code: "FORBIDDEN"},
		{name: "409", fault: qdaytest.Fault{Kind: qdaytest.Status409}, status: 409, code: "RESIDENCY_STOPPED"},
		{name: "429 seconds", fault: qdaytest.Fault{Kind: qdaytest.Status429}, status: 429, code: "RATE_LIMITED", retryAfter: "1"},
		{name: "429 http-date", opts: qdaytest.Options{RetryAfter: qdaytest.RetryAfterHTTPDate},
			fault: qdaytest.Fault{Kind: qdaytest.Status429}, status: 429, code: "RATE_LIMITED", retryAfter: "*"},
		{name: "429 none by option", opts: qdaytest.Options{RetryAfter: qdaytest.RetryAfterNone},
			fault: qdaytest.Fault{Kind: qdaytest.Status429}, status: 429, code: "RATE_LIMITED"},
		{name: "429 override seconds", fault: qdaytest.Fault{Kind: qdaytest.Status429, RetryAfter: "7"}, status: 429, code: "RATE_LIMITED", retryAfter: "7"},
		{name: "429 override date", fault: qdaytest.Fault{Kind: qdaytest.Status429, RetryAfter: date}, status: 429, code: "RATE_LIMITED", retryAfter: date},
		{name: "429 no retry-after", fault: qdaytest.Fault{Kind: qdaytest.Status429, NoRetryAfter: true}, status: 429, code: "RATE_LIMITED"},
		{name: "500", fault: qdaytest.Fault{Kind: qdaytest.Status500}, status: 500, code: "INTERNAL"},
		{name: "502", fault: qdaytest.Fault{Kind: qdaytest.Status502}, status: 502, code: "BAD_GATEWAY"},
		{name: "503", fault: qdaytest.Fault{Kind: qdaytest.Status503}, status: 503, code: "UNAVAILABLE"},
		{name: "503 retry-after", fault: qdaytest.Fault{Kind: qdaytest.Status503, RetryAfter: "3"}, status: 503, code: "UNAVAILABLE", retryAfter: "3"},
		{name: "garbage 500", fault: qdaytest.Fault{Kind: qdaytest.Garbage500}, status: 500, notJSON: true},
		{name: "garbage 200", fault: qdaytest.Fault{Kind: qdaytest.Garbage200}, status: 200, notJSON: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Token = tok
			s := newServer(t, tc.opts)
			hc := httpClient(t, 20*time.Second)
			s.Script(tc.fault)
			a := checkpoint(t, hc, s, tok, `{"focus":"x"}`)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d", a.status, tc.status)
			}
			if tc.notJSON {
				if json.Valid(a.body) {
					t.Fatalf("garbage body is JSON: %q", a.body)
				}
			} else if a.code() != tc.code {
				t.Fatalf("code %q, want %q", a.code(), tc.code)
			}
			ra, has := a.header.Get("Retry-After"), len(a.header.Values("Retry-After")) > 0
			switch tc.retryAfter {
			case "":
				if has {
					t.Fatalf("Retry-After %q, want none", ra)
				}
			case "*":
				if _, err := http.ParseTime(ra); err != nil {
					t.Fatalf("Retry-After %q is not an HTTP-date", ra)
				}
			default:
				if ra != tc.retryAfter {
					t.Fatalf("Retry-After %q, want %q", ra, tc.retryAfter)
				}
			}
			rs := s.Requests()
			if len(rs) != 1 || rs[0].Fault != string(tc.fault.Kind) || rs[0].Status != tc.status || rs[0].Applied {
				t.Fatalf("recorded %+v", rs)
			}
			if len(s.Accepted()) != 0 {
				t.Fatal("a faulted checkpoint was applied")
			}
			// The script is spent: the next request is answered normally.
			wantStatus(t, checkpoint(t, hc, s, tok, `{"focus":"x"}`), 200, "")
		})
	}
}

func TestFaultsComeBeforeEverything(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok, Rate: 0.001, Burst: 1})
	hc := httpClient(t, 20*time.Second)
	s.Script(qdaytest.Fault{Kind: qdaytest.Status503}, qdaytest.Fault{Kind: qdaytest.Status502})
	// No token at all: the scripted fault answers, not the 401.
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, "", ""), 503, "UNAVAILABLE")
	// A bad body: the fault answers, not the guard.
	wantStatus(t, checkpoint(t, hc, s, tok, `{nope`), 502, "BAD_GATEWAY")
	if s.ScriptLen() != 0 {
		t.Fatal("script not consumed")
	}
	// Faulted requests took no token from the bucket.
	wantStatus(t, checkpoint(t, hc, s, tok, `{"focus":"x"}`), 200, "")
	wantStatus(t, checkpoint(t, hc, s, tok, `{"focus":"y"}`), 429, "RATE_LIMITED")
}

func TestSlowHangReset(t *testing.T) {
	s := newServer(t, qdaytest.Options{Token: tok})
	hc := httpClient(t, 20*time.Second)

	s.Script(qdaytest.Fault{Kind: qdaytest.Slow, Delay: 150 * time.Millisecond})
	start := time.Now()
	wantStatus(t, checkpoint(t, hc, s, tok, `{"focus":"slow"}`), 200, "")
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("slow answered after %v", el)
	}
	if a := s.Accepted(); len(a) != 1 || a[0].Fault != "slow" {
		t.Fatalf("a slow checkpoint is applied and marked: %+v", a)
	}

	s.Script(qdaytest.Fault{Kind: qdaytest.Reset})
	if _, err := do(t, hc, s, http.MethodPost, qdaytest.CheckpointPath, tok, `{"focus":"reset"}`); err == nil {
		t.Fatal("a reset connection gave an answer")
	}

	s.Script(qdaytest.Fault{Kind: qdaytest.Hang})
	short := httpClient(t, 200*time.Millisecond)
	start = time.Now()
	if _, err := do(t, short, s, http.MethodPost, qdaytest.CheckpointPath, tok, `{"focus":"hang"}`); err == nil {
		t.Fatal("a hung request gave an answer")
	}
	if el := time.Since(start); el > 15*time.Second { // generous: a loaded CI machine
		t.Fatalf("client gave up after %v", el)
	}
	rs := s.Requests()
	if len(rs) != 3 || rs[1].Fault != "reset" || rs[1].Status != 0 || rs[2].Fault != "hang" || rs[2].Status != 0 {
		t.Fatalf("recorded %+v", rs)
	}
	if len(s.Accepted()) != 1 {
		t.Fatal("reset or hang applied a checkpoint")
	}
}

func TestCloseDoesNotHang(t *testing.T) {
	s := qdaytest.New(qdaytest.Options{Token: tok})
	hc := httpClient(t, 30*time.Second)
	s.Script(qdaytest.Fault{Kind: qdaytest.Hang}, qdaytest.Fault{Kind: qdaytest.Slow, Delay: time.Minute})
	errs := make(chan error, 3)
	go func() {
		_, err := do(t, hc, s, http.MethodPost, qdaytest.CheckpointPath, tok, `{"focus":"x"}`)
		errs <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) == 1 })
	go func() {
		_, err := do(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "")
		errs <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) == 2 })
	go func() {
		_, err := do(t, hc, s, http.MethodGet, qdaytest.WaitPath+"?max_seconds=90", tok, "")
		errs <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) == 3 })

	closed := make(chan struct{})
	start := time.Now()
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		t.Fatal("Close hangs")
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Fatal("a held request got an answer after Close")
		}
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("Close took %v", el)
	}
	s.Close() // twice is fine
}

func TestSetFailRateIsSeeded(t *testing.T) {
	run := func(seed int64) []string {
		s := newServer(t, qdaytest.Options{Token: tok, Seed: seed})
		hc := httpClient(t, 20*time.Second)
		s.SetFailRate(0.5)
		for range 40 {
			_, _ = do(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, "")
		}
		var faults []string
		for _, r := range s.Requests() {
			faults = append(faults, r.Fault)
		}
		return faults
	}
	a, b := run(7), run(7)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("same seed, different faults:\n%v\n%v", a, b)
	}
	n := 0
	for _, f := range a {
		if f != "" {
			n++
		}
	}
	if n < 8 || n > 32 {
		t.Fatalf("%d of 40 faulted at p=0.5", n)
	}

	s := newServer(t, qdaytest.Options{Token: tok, Seed: 1})
	hc := httpClient(t, 20*time.Second)
	s.SetFailRate(1, qdaytest.Status502)
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 502, "BAD_GATEWAY")
	// The script comes first.
	s.Script(qdaytest.Fault{Kind: qdaytest.Status409})
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 409, "RESIDENCY_STOPPED")
	s.SetFailRate(0)
	wantStatus(t, must(t, hc, s, http.MethodGet, qdaytest.ResumePath, tok, ""), 200, "")
}

func TestConcurrentUse(t *testing.T) {
	s := newServer(t, qdaytest.Options{})
	hc := httpClient(t, 20*time.Second)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			token := fmt.Sprintf("agent-%d", g%3)
			for i := range 10 {
				a, err := do(t, hc, s, http.MethodPost, qdaytest.CheckpointPath, token, fmt.Sprintf(`{"focus":"g%d i%d"}`, g, i))
				if err != nil || a.status != 200 {
					t.Errorf("checkpoint: %v %d", err, a.status)
				}
				_, _ = do(t, hc, s, http.MethodGet, qdaytest.ResumePath, token, "")
				s.PushEvent(json.RawMessage(`{}`))
				_ = s.Requests()
				_ = s.MaxInWindow(time.Second)
			}
		})
	}
	wg.Wait()
	if n := len(s.Accepted()); n != 60 {
		t.Fatalf("accepted %d, want 60", n)
	}
	if n := len(s.Requests()); n != 120 {
		t.Fatalf("recorded %d, want 120", n)
	}
	var buf bytes.Buffer
	for _, r := range s.Accepted() {
		buf.Write(r.Body)
	}
	if !strings.Contains(buf.String(), "g5 i9") {
		t.Fatal("a body is missing")
	}
}

func TestNewPanicsOnBadOptions(t *testing.T) {
	for _, o := range []qdaytest.Options{{RetryAfter: "minutes"}, {Rate: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", o)
				}
			}()
			s := qdaytest.New(o)
			s.Close()
		}()
	}
}
