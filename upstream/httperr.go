package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// Shared HTTP helpers for the backends: every HTTP upstream classifies its
// answers with FromHTTP and its transport failures with FromTransport, so
// the outbox sees the same outcomes whatever the service.

// MaxErrorMessage caps, in characters, the part of an upstream's own error
// message that FromHTTP keeps. Error text ends up in logs, in status and in
// resume, so it is kept short.
const MaxErrorMessage = 200

// maxCodeLen caps an upstream's error code; anything longer is not a code.
const maxCodeLen = 64

// maxRetryAfterSeconds is the largest delta-seconds ParseRetryAfter turns
// into a time.Duration without overflowing; larger values saturate.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter reads a Retry-After header value in either of its forms
// (RFC 9110 §10.2.3): delta-seconds (a non-negative integer) or an
// HTTP-date. A date in the past means "now": 0, true. A value in neither
// form (empty, negative, fractional, garbage) gives 0, false. An absurdly
// large delta saturates instead of overflowing; callers cap the wait with
// their own policy.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds { // only overflow gets here
			return time.Duration(maxRetryAfterSeconds) * time.Second, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// FromHTTP classifies an upstream's HTTP answer:
//
//   - 2xx: nil, the upstream has it;
//   - 429: RateLimited, with RetryAfter from the Retry-After header;
//   - 408: Retry;
//   - 401, 403: Unauthorized;
//   - 409 with code RESIDENCY_STOPPED: Stopped; any other 409: Rejected;
//   - any other 4xx: Rejected (the write goes to the dead letter);
//   - 5xx: Retry, with RetryAfter when the answer carries one (503 does);
//   - anything else (1xx, a 3xx redirect, which backends do not follow, or
//     a status outside 100..599): Retry, so a misconfigured URL keeps its
//     writes instead of dead-lettering them.
//
// The code and message come from a body shaped
// {"error":{"code":"…","message":"…"}} (or {"error":"…"}) when there is one;
// any other body is ignored. The message kept is the upstream's own, with
// control characters removed, credential-shaped runs redacted and cut to
// MaxErrorMessage characters; a body that is not such JSON is never quoted,
// since it may echo the request. The request's body and token are not
// inputs here, so they cannot leak through this function (a backend that
// knows its token scrubs it from the upstream's message too).
func FromHTTP(status int, header http.Header, body []byte, now time.Time) *Error {
	if status >= 200 && status <= 299 {
		return nil
	}
	code, msg, isJSON := parseErrorBody(body)
	e := &Error{Status: status, Code: code}
	switch {
	case status == http.StatusTooManyRequests:
		e.Outcome = RateLimited
	case status == http.StatusRequestTimeout:
		e.Outcome = Retry
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Outcome = Unauthorized
	case status == http.StatusConflict && code == capsule.CodeResidencyStopped:
		e.Outcome = Stopped
	case status >= 400 && status <= 499:
		e.Outcome = Rejected
	case status >= 500 && status <= 599:
		e.Outcome = Retry
	case status >= 300 && status <= 399:
		e.Outcome = Retry
		if msg == "" {
			msg = "redirect not followed; check the configured url"
		}
	default:
		e.Outcome = Retry
		if msg == "" {
			msg = "unexpected answer"
		}
	}
	if e.Outcome == Retry || e.Outcome == RateLimited {
		if d, ok := ParseRetryAfter(header.Get("Retry-After"), now); ok {
			e.RetryAfter = d
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
		if msg == "" {
			msg = "status " + strconv.Itoa(status)
		}
		if len(body) > 0 && !isJSON {
			msg += " (the answer is not JSON)"
		}
	}
	e.Err = errors.New(msg)
	return e
}

// parseErrorBody extracts code and message from an error body; isJSON
// reports whether the body was a JSON object at all.
func parseErrorBody(body []byte) (code, msg string, isJSON bool) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return "", "", false
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", "", false
	}
	if len(env.Error) == 0 {
		return "", "", true
	}
	var obj struct {
		Code    json.RawMessage `json:"code"`
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(env.Error, &obj); err == nil {
		return cleanCode(jsonString(obj.Code)), CleanMessage(jsonString(obj.Message)), true
	}
	return "", CleanMessage(jsonString(env.Error)), true
}

// jsonString decodes raw as a JSON string, "" when it is anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// cleanCode keeps an error code only when it looks like one (letters,
// digits, '_', '.', '-'; at most 64 characters), so a hostile server cannot
// smuggle text into logs through it.
func cleanCode(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxCodeLen {
		return ""
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return ""
		}
	}
	return s
}

// Credential shapes redacted from an upstream's message: a bearer
// credential, well-known key prefixes, and long runs of token characters
// that carry digits (random keys, hex and base64 blobs, JWTs, UUIDs).
var (
	reAuthScheme = lazyregexp.New(`(?i)\b(bearer)\s+[^\s,;"']+`)
	reKeyPrefix  = lazyregexp.New(`\b(sk|pk|rk|ghp|gho|ghs|ghu|github_pat|xox[abpors]|glpat|AKIA)[-_][A-Za-z0-9_\-]{6,}`)
	reTokenRun   = lazyregexp.New(`[A-Za-z0-9+/=_\-.~]{20,}`)
)

// CleanMessage makes an upstream's error message safe to keep: control
// characters and runs of white space become one space, invisible ones
// (guard.IsHiddenRune: bidi controls, zero-width characters) are removed,
// anything credential-shaped (the secret guard's rules, then the broader
// ones here) becomes "[redacted]", and the result is cut to
// MaxErrorMessage characters (marked with "…").
func CleanMessage(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	space := false
	for _, r := range s {
		if guard.IsHiddenRune(r) && !unicode.IsControl(r) {
			continue // a bidi override or a zero-width character: gone, not a space
		}
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	s = b.String()
	// The secret guard's rules first (gitleaks' set and continuityd's
	// own: provider tokens, URL passwords, passwords told in words), so
	// what the guard refuses on the way in is also kept out of error text
	// on the way back. The rules below are broader nets the guard cannot
	// use (any Bearer value, a short sk-/ghp_ prefix, any 20+ token run
	// with 3 digits): they would refuse ids and hashes in writes, but
	// over-redacting an error message costs nothing.
	s = guard.RedactCredentialShapes(s, "[redacted]")
	s = reAuthScheme.ReplaceAllString(s, "$1 [redacted]")
	s = reKeyPrefix.ReplaceAllString(s, "[redacted]")
	s = reTokenRun.ReplaceAllStringFunc(s, func(run string) string {
		digits := 0
		for i := 0; i < len(run); i++ {
			if run[i] >= '0' && run[i] <= '9' {
				digits++
			}
		}
		if digits >= 3 {
			return "[redacted]"
		}
		return run
	})
	if utf8.RuneCountInString(s) > MaxErrorMessage {
		rs := []rune(s)
		s = strings.TrimSpace(string(rs[:MaxErrorMessage-1])) + "…"
	}
	return s
}

// FromTransport classifies a failure to get an answer at all: connection
// refused or reset, DNS, TLS, a timeout (the request's own or the caller's
// context), an early EOF. All of them are Retry, with the cause wrapped so
// errors.Is(err, context.DeadlineExceeded) and friends still work. An
// *Error passes through unchanged; nil gives nil.
func FromTransport(err error) *Error {
	if err == nil {
		return nil
	}
	var ue *Error
	if errors.As(err, &ue) {
		return ue
	}
	return &Error{Outcome: Retry, Err: fmt.Errorf("no answer: %w", err)}
}
