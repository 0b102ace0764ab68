package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	cases := []struct {
		name string
		v    string
		want time.Duration
		ok   bool
	}{
		{"zero", "0", 0, true},
		{"seconds", "7", 7 * time.Second, true},
		{"padded", "  12 ", 12 * time.Second, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"large", "86400", 24 * time.Hour, true},
		{"overflow saturates", "99999999999999999999999", time.Duration(maxRetryAfterSeconds) * time.Second, true},
		{"just above max", fmt.Sprint(maxRetryAfterSeconds + 1), time.Duration(maxRetryAfterSeconds) * time.Second, true},
		{"imf date ahead", testNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"rfc850 date ahead", testNow.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT"), time.Hour, true},
		{"asctime date ahead", testNow.Add(time.Minute).Format(time.ANSIC), time.Minute, true},
		{"date now", testNow.Format(http.TimeFormat), 0, true},
		{"date in the past", testNow.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"hex", "0x10", 0, false},
		{"bad date", "Mon, 32 Foo 2026 25:61:00 GMT", 0, false},
		{"iso date is not an http-date", testNow.Add(time.Minute).Format(time.RFC3339), 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.v, testNow)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func errBody(code, msg string) []byte {
	b, err := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "details": map[string]int{"x": 1}}})
	if err != nil {
		panic(err)
	}
	return b
}

func TestFromHTTP(t *testing.T) {
	date := testNow.Add(45 * time.Second).Format(http.TimeFormat)
	cases := []struct {
		name       string
		status     int
		header     http.Header
		body       []byte
		nilErr     bool
		outcome    Outcome
		code       string
		retryAfter time.Duration
		msgHas     string
	}{
		{name: "200", status: 200, body: []byte(`{"saved":true}`), nilErr: true},
		{name: "201 garbage", status: 201, body: []byte(`<html>`), nilErr: true},
		{name: "204", status: 204, nilErr: true},
		{name: "299", status: 299, nilErr: true},

		{name: "429 seconds", status: 429, header: hdr("Retry-After", "3"), body: errBody("RATE_LIMITED", "slow down"),
			outcome: RateLimited, code: "RATE_LIMITED", retryAfter: 3 * time.Second, msgHas: "slow down"},
		{name: "429 http-date", status: 429, header: hdr("Retry-After", date),
			outcome: RateLimited, retryAfter: 45 * time.Second, msgHas: "Too Many Requests"},
		{name: "429 past date", status: 429, header: hdr("Retry-After", testNow.Add(-time.Minute).Format(http.TimeFormat)),
			outcome: RateLimited, retryAfter: 0},
		{name: "429 none", status: 429, outcome: RateLimited, retryAfter: 0},
		{name: "429 garbage header", status: 429, header: hdr("Retry-After", "later"), outcome: RateLimited, retryAfter: 0},

		{name: "408", status: 408, outcome: Retry, msgHas: "Request Timeout"},
		{name: "401", status: 401, body: errBody("UNAUTHORIZED", "bad token"), outcome: Unauthorized, code: "UNAUTHORIZED"},
		{name: "403", status: 403, outcome: Unauthorized},
		{name: "401 ignores retry-after", status: 401, header: hdr("Retry-After", "9"), outcome: Unauthorized, retryAfter: 0},

		{name: "409 stopped", status: 409, body: errBody("RESIDENCY_STOPPED", "only resume_residency lifts it"),
			outcome: Stopped, code: "RESIDENCY_STOPPED"},
		{name: "409 other code", status: 409, body: errBody("CONFLICT", "x"), outcome: Rejected, code: "CONFLICT"},
		{name: "409 no body", status: 409, outcome: Rejected},
		{name: "409 stopped as a message is not the code", status: 409, body: []byte(`{"error":"RESIDENCY_STOPPED"}`),
			outcome: Rejected, msgHas: "RESIDENCY_STOPPED"},

		{name: "400", status: 400, body: errBody("INVALID_PUBLIC_STATUS", "looks like a secret"),
			outcome: Rejected, code: "INVALID_PUBLIC_STATUS", msgHas: "looks like a secret"},
		{name: "404", status: 404, outcome: Rejected, msgHas: "Not Found"},
		{name: "413", status: 413, outcome: Rejected},
		{name: "422", status: 422, body: errBody("MOTIVE_REQUIRED", ""), outcome: Rejected, code: "MOTIVE_REQUIRED"},

		{name: "500", status: 500, outcome: Retry, msgHas: "Internal Server Error"},
		{name: "500 garbage body", status: 500, body: []byte("<html><body>oops: focus=my secret plan</body></html>"),
			outcome: Retry, msgHas: "not JSON"},
		{name: "502", status: 502, outcome: Retry},
		{name: "503 retry-after", status: 503, header: hdr("Retry-After", "120"), outcome: Retry, retryAfter: 2 * time.Minute},
		{name: "503 http-date", status: 503, header: hdr("Retry-After", date), outcome: Retry, retryAfter: 45 * time.Second},
		{name: "504", status: 504, outcome: Retry},

		{name: "302 is not followed", status: 302, header: hdr("Location", "https://elsewhere/"), outcome: Retry, msgHas: "redirect"},
		{name: "100", status: 100, outcome: Retry, msgHas: "unexpected"},
		{name: "600", status: 600, outcome: Retry, msgHas: "unexpected"},

		{name: "code and message", status: 400, body: errBody("EVIDENCE_REQUIRED", "closing needs post:UUID"),
			outcome: Rejected, code: "EVIDENCE_REQUIRED", msgHas: "closing needs post:UUID"},
		{name: "error as string", status: 400, body: []byte(`{"error":"bad thing"}`), outcome: Rejected, msgHas: "bad thing"},
		{name: "error with wrong types", status: 400, body: []byte(`{"error":{"code":5,"message":["x"]}}`), outcome: Rejected, msgHas: "Bad Request"},
		{name: "hostile code dropped", status: 400, body: errBody("BAD\nCODE <script>", "m"), outcome: Rejected, code: ""},
		{name: "long code dropped", status: 400, body: errBody(strings.Repeat("A", 65), "m"), outcome: Rejected, code: ""},
		{name: "truncated json", status: 400, body: []byte(`{"error":{"code":"X"`), outcome: Rejected, code: "", msgHas: "not JSON"},
		{name: "json array", status: 400, body: []byte(`[1,2]`), outcome: Rejected, msgHas: "not JSON"},
		{name: "json without error", status: 400, body: []byte(`{"detail":"x"}`), outcome: Rejected, msgHas: "Bad Request"},
		{name: "null error", status: 400, body: []byte(`{"error":null}`), outcome: Rejected, msgHas: "Bad Request"},
		{name: "whitespace body", status: 500, body: []byte("  \n"), outcome: Retry, msgHas: "Internal Server Error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			e := FromHTTP(tc.status, h, tc.body, testNow)
			if tc.nilErr {
				if e != nil {
					t.Fatalf("want nil, got %v", e)
				}
				return
			}
			if e == nil {
				t.Fatal("want an error, got nil")
			}
			if e.Outcome != tc.outcome || e.Status != tc.status || e.Code != tc.code || e.RetryAfter != tc.retryAfter {
				t.Fatalf("got outcome %v status %d code %q retry-after %v; want %v %d %q %v",
					e.Outcome, e.Status, e.Code, e.RetryAfter, tc.outcome, tc.status, tc.code, tc.retryAfter)
			}
			if e.Err == nil {
				t.Fatal("Err is nil")
			}
			if tc.msgHas != "" && !strings.Contains(e.Error(), tc.msgHas) {
				t.Fatalf("message %q lacks %q", e.Error(), tc.msgHas)
			}
			if strings.Contains(e.Error(), "secret plan") || strings.Contains(e.Error(), "<html>") {
				t.Fatalf("message quotes a non-JSON body: %q", e.Error())
			}
			if Classify(e) != tc.outcome {
				t.Fatalf("Classify = %v", Classify(e))
			}
		})
	}
}

func TestFromHTTPNilHeader(t *testing.T) {
	e := FromHTTP(429, nil, nil, testNow)
	if e == nil || e.Outcome != RateLimited || e.RetryAfter != 0 {
		t.Fatalf("got %+v", e)
	}
}

func TestFromHTTPMessageIsShortAndRedacted(t *testing.T) {
	// Fake credentials are assembled at run time so the source holds none.
	hexKey := strings.Repeat("3f9a", 10)
	skKey := "sk-" + strings.Repeat("Ab3", 8)
	cases := []struct {
		name, msg string
		never     []string
		has       string
	}{
		{"bearer echoed", "bad header Authorization: Bearer abcDEF.ghi-jkl", []string{"abcDEF.ghi-jkl"}, "Bearer [redacted]"},
		{"hex key", "token " + hexKey + " is revoked", []string{hexKey}, "[redacted] is revoked"},
		{"sk key", "key=" + skKey, []string{skKey}, "[redacted]"},
		{"control characters", "line one\nline two\r\n\tthree\x00four", []string{"\n", "\r", "\t", "\x00"}, "line one line two three four"},
		{"words stay", "the token expired; ask the operator for a new one", nil, "the token expired; ask the operator for a new one"},
		{"paths stay", "see https://qdaybunker.fun/v1/continuity/checkpoint", nil, "qdaybunker.fun/v1/continuity/checkpoint"},
		{"invalid utf8", "caf\xe9 au lait", nil, "caf\uFFFD au lait"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := FromHTTP(400, nil, errBody("X", tc.msg), testNow)
			msg := e.Err.Error()
			for _, n := range tc.never {
				if strings.Contains(msg, n) {
					t.Fatalf("message %q contains %q", msg, n)
				}
			}
			if !strings.Contains(msg, tc.has) {
				t.Fatalf("message %q lacks %q", msg, tc.has)
			}
		})
	}

	long := strings.Repeat("é", 5000)
	e := FromHTTP(400, nil, errBody("X", long), testNow)
	if n := len([]rune(e.Err.Error())); n > MaxErrorMessage {
		t.Fatalf("message has %d characters, want at most %d", n, MaxErrorMessage)
	}
	if !strings.HasSuffix(e.Err.Error(), "…") {
		t.Fatalf("a cut message should end with an ellipsis: %q", e.Err.Error())
	}
	// A credential cut in half by the cap is still redacted: redaction
	// comes first.
	e = FromHTTP(400, nil, errBody("X", strings.Repeat("x ", 95)+hexKey), testNow)
	if strings.Contains(e.Err.Error(), hexKey[:8]) {
		t.Fatalf("a credential survived at the cut: %q", e.Err.Error())
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestFromTransport(t *testing.T) {
	if FromTransport(nil) != nil {
		t.Fatal("FromTransport(nil) != nil")
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name string
		err  error
		is   error
	}{
		{"connection refused", refused, syscall.ECONNREFUSED},
		{"connection reset", reset, syscall.ECONNRESET},
		{"url error around reset", &urlErr{reset}, syscall.ECONNRESET},
		{"deadline", fmt.Errorf("Post: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{"canceled", context.Canceled, context.Canceled},
		{"eof", io.EOF, io.EOF},
		{"unexpected eof", io.ErrUnexpectedEOF, io.ErrUnexpectedEOF},
		{"net timeout", timeoutErr{}, nil},
		{"anything else", errors.New("tls: handshake failure"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := FromTransport(tc.err)
			if e == nil || e.Outcome != Retry || e.Status != 0 || e.Code != "" || e.RetryAfter != 0 {
				t.Fatalf("got %+v", e)
			}
			if !errors.Is(e, tc.err) {
				t.Fatal("cause is not wrapped")
			}
			if tc.is != nil && !errors.Is(e, tc.is) {
				t.Fatalf("errors.Is(%v) = false", tc.is)
			}
			if Classify(e) != Retry {
				t.Fatal("Classify != Retry")
			}
		})
	}
	// An *Error passes through.
	stopped := &Error{Outcome: Stopped, Status: 409}
	if got := FromTransport(fmt.Errorf("wrapped: %w", stopped)); got != stopped {
		t.Fatalf("an *Error did not pass through: %v", got)
	}
}

// urlErr stands in for *url.Error: an Unwrap chain around the cause.
type urlErr struct{ err error }

func (u *urlErr) Error() string { return "Post \"http://127.0.0.1:1/v1\": " + u.err.Error() }
func (u *urlErr) Unwrap() error { return u.err }
