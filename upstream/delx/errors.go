package delx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/lazyregexp"
	"github.com/continuityd/continuityd/upstream"
)

// How failures map to outcomes.
//
// What the SDK (v1.8.0) gives back, read from its streamable client:
//   - An HTTP status is only text: a 429/500/502/503/504 becomes
//     "<ErrRejected>: sending \"tools/call\": Too Many Requests" without its
//     headers or body; any other non-2xx becomes the JSON-RPC error of its
//     body when the body is one (wrapped with ErrRejected), else
//     "sending ...: Unauthorized" (which also breaks the session), and a 404
//     on a known session wraps mcp.ErrSessionMissing. So the status,
//     Retry-After and the body of a failed POST are read by our own
//     RoundTripper into a per-call probe (transport.go).
//   - A JSON-RPC error response (in a 200, or decoded from a non-2xx body)
//     is a *jsonrpc.Error (Code, Message, Data) in the error chain.
//   - A connection error is the *url.Error of http.Client.Do, wrapped with
//     ErrRejected (the session survives); an unreadable answer breaks the
//     session, and later calls fail with mcp.ErrConnectionClosed.
//   - A tool failure is a normal result with IsError set.
//
// The mapping:
//
//	token unreadable or empty             -> Unauthorized (nothing sent)
//	JSON-RPC -32029 anywhere              -> RateLimited, RetryAfter = data.retry_after_seconds
//	HTTP 429                              -> RateLimited, RetryAfter = max(Retry-After, body's data.retry_after_seconds)
//	HTTP 401, 403                         -> Unauthorized
//	HTTP 408, 5xx, 3xx (not followed)     -> Retry (5xx: with Retry-After if sent)
//	HTTP 404 on a session (session gone)  -> Retry, reconnect
//	HTTP 406, other 4xx                   -> Rejected
//	(the HTTP rows are upstream.FromHTTP's, shared with the other backends;
//	after a status the SDK treats as fatal, 4xx without a JSON-RPC body,
//	the session is reconnected)
//	connection refused/reset, garbage,
//	a failed or closed MCP connection     -> Retry, reconnect
//	timeout                               -> Retry (the session is kept)
//	other JSON-RPC error                  -> -32600/-32601/-32602 Rejected; a message
//	                                         that reads as rate limiting or auth (see
//	                                         below) accordingly; else Retry
//	tool result with isError              -> Rejected, unless its text reads as
//	                                         rate limiting or auth (see textOutcome)
//
// Text from the server (tool error text, JSON-RPC messages, error bodies) is
// scrubbed of the capsule's values and passed through upstream.CleanMessage
// (credential shapes redacted, cut to 200 characters) before it goes into an
// error. The token never appears in any error.

// classify maps a failed call (or connect) to an *upstream.Error. broken
// reports whether the session should be dropped and reconnected.
func classify(ctx context.Context, err error, p *probe, sent *capsule.Capsule) (ue *upstream.Error, broken bool) {
	status, header, body, terr := p.snapshot()

	if isTokenError(terr) || isTokenError(err) {
		cause := terr
		if cause == nil {
			cause = err
		}
		return &upstream.Error{Outcome: upstream.Unauthorized, Err: cause}, false
	}

	rpcErr := findRPCError(err)
	if rpcErr == nil {
		rpcErr = rpcErrorFromBody(body)
	}
	rateLimitedRPC := rpcErr != nil && rpcErr.Code == CodeRateLimited

	if status != 0 {
		// The status rules every HTTP upstream shares (429 RateLimited with
		// Retry-After, 401/403 Unauthorized, 408/5xx/3xx Retry, other 4xx
		// Rejected), then Delx's own: a JSON-RPC body's code, -32029 with
		// data.retry_after_seconds, and a 404 that means the MCP session
		// expired.
		ue := upstream.FromHTTP(status, header, body, time.Now())
		if ue == nil { // a 2xx is never recorded; be safe anyway
			ue = &upstream.Error{Outcome: upstream.Retry, Status: status, Err: errors.New("unexpected answer")}
		}
		if rpcErr != nil {
			ue.Code = strconv.FormatInt(rpcErr.Code, 10)
		}
		if rateLimitedRPC {
			ue.Outcome = upstream.RateLimited
			ue.RetryAfter = max(ue.RetryAfter, retryAfterFromData(rpcErr.Data))
		}
		if status == http.StatusNotFound && errors.Is(err, mcp.ErrSessionMissing) {
			ue.Outcome = upstream.Retry
			ue.Err = errors.New("the server no longer knows the MCP session")
		}
		ue.RetryAfter = capRetryAfter(ue.RetryAfter)
		ue.Err = errors.New(sanitize(ue.Err.Error(), sent))
		// The SDK keeps the session after a 429 or 5xx, and after a status
		// whose body is a JSON-RPC error; any other status breaks it.
		return ue, !keptBySDK(err)
	}

	if rateLimitedRPC {
		msg := sanitize(rpcErr.Message, sent)
		if msg == "" {
			msg = "rate limited"
		}
		return &upstream.Error{
			Outcome:    upstream.RateLimited,
			Code:       strconv.Itoa(CodeRateLimited),
			RetryAfter: retryAfterFromData(rpcErr.Data),
			Err:        errors.New(msg),
		}, false
	}

	if terr != nil {
		// The request got no answer: refused, reset, or out of time. A new
		// session is started after a connection failure; after a timeout
		// the session itself is fine.
		return upstream.FromTransport(terr), ctx.Err() == nil
	}

	if rpcErr != nil && !sdkInternal(rpcErr.Code) {
		ue := &upstream.Error{Code: strconv.FormatInt(rpcErr.Code, 10)}
		msg := sanitize(rpcErr.Message, sent)
		ue.Err = fmt.Errorf("JSON-RPC error %d: %s", rpcErr.Code, msg)
		switch rpcErr.Code {
		case jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			ue.Outcome = upstream.Rejected
		default:
			ue.Outcome = upstream.Retry
			if o, ok := textOutcome(rpcErr.Message); ok {
				ue.Outcome = o
				if o == upstream.RateLimited {
					ue.RetryAfter = max(retryAfterFromData(rpcErr.Data), retryAfterFromText(rpcErr.Message))
				}
			}
		}
		return ue, false
	}

	// Out of time waiting for the answer: the session is still sound. An
	// unreadable answer, a closed or failed connection: start over.
	return upstream.FromTransport(err), ctx.Err() == nil
}

// rejectedMarker matches the SDK's jsonrpc2.ErrRejected (code -32005), which
// it wraps around failures that leave the session usable.
var rejectedMarker = &jsonrpc.Error{Code: -32005}

// keptBySDK reports whether the SDK marked err as leaving the session
// usable.
func keptBySDK(err error) bool { return errors.Is(err, rejectedMarker) }

// sdkInternal reports whether code is one of the SDK's own markers
// (rejected by transport, client/server closing) rather than the server's.
func sdkInternal(code int64) bool {
	return code == -32005 || code == -32004 || code == -32003
}

// findRPCError returns the JSON-RPC error the server sent, if err carries
// one: the first *jsonrpc.Error in err's tree that is not an SDK marker.
func findRPCError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	walkErrors(err, func(e error) bool {
		if we, ok := e.(*jsonrpc.Error); ok && !sdkInternal(we.Code) {
			found = we
			return false
		}
		return true
	})
	return found
}

// walkErrors visits err's tree depth first until visit returns false.
func walkErrors(err error, visit func(error) bool) bool {
	if err == nil {
		return true
	}
	if !visit(err) {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walkErrors(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if !walkErrors(e, visit) {
				return false
			}
		}
	}
	return true
}

// rpcErrorFromBody decodes a JSON-RPC error response body (Delx sends one
// with its 429s on MCP paths; the SDK does not read the body of a 429).
func rpcErrorFromBody(body []byte) *jsonrpc.Error {
	if len(body) == 0 {
		return nil
	}
	var resp struct {
		Error *jsonrpc.Error `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Error == nil {
		return nil
	}
	return resp.Error
}

// retryAfterFromData reads retry_after_seconds (a number or a numeric
// string) from JSON-RPC error data.
func retryAfterFromData(data json.RawMessage) time.Duration {
	if len(data) == 0 {
		return 0
	}
	var d struct {
		RetryAfter json.RawMessage `json:"retry_after_seconds"`
	}
	if json.Unmarshal(data, &d) != nil || len(d.RetryAfter) == 0 {
		return 0
	}
	s := strings.Trim(string(d.RetryAfter), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0
	}
	return capRetryAfter(time.Duration(f * float64(time.Second)))
}

// maxRetryAfter bounds any server-given wait, so a bogus value cannot stall
// an agent's outbox for days.
const maxRetryAfter = 24 * time.Hour

func capRetryAfter(d time.Duration) time.Duration { return min(d, maxRetryAfter) }

// toolError maps a tool result with isError set. Delx reports its own
// refusals this way ("Tool failures come back inside the tool result, not
// as HTTP statuses"), so it is Rejected unless the text reads as rate
// limiting or auth.
func toolError(tool string, res *mcp.CallToolResult, sent *capsule.Capsule) *upstream.Error {
	text := resultText(res)
	ue := &upstream.Error{Outcome: upstream.Rejected, Code: structuredCode(res), Answered: true}
	if o, ok := textOutcome(text); ok {
		ue.Outcome = o
		if o == upstream.RateLimited {
			ue.RetryAfter = retryAfterFromText(text)
		}
	}
	msg := sanitize(text, sent)
	if msg == "" {
		msg = "the tool reported an error without text"
	}
	ue.Err = fmt.Errorf("%s refused: %s", tool, msg)
	return ue
}

// The heuristics that read a tool error's text. Delx documents none of its
// texts, so they look for the words any service uses:
//   - rate limiting: "rate limit"/"rate-limited"/"ratelimit", "too many
//     requests", "throttled", "quota exceeded", a bare 429, or -32029;
//     a "retry after N" / "retry_after_seconds: N" / "try again in N s|min"
//     gives RetryAfter.
//   - a refusal of the content wins over auth words, since a secret refusal
//     talks of credentials: "secret", "credential-shaped", "schema",
//     "refused before storage", "invalid capsule".
//   - auth: "unauthorized", "unauthenticated", "forbidden", "not
//     authorized", "permission denied", "access denied", "authentication
//     failed/required", an invalid/expired/missing/revoked token, agent
//     token, credentials or API key, a bare 401 or 403.
//
// Anything else is Rejected.
var (
	rateLimitText = lazyregexp.New(`(?i)rate[ _-]?limit|too many requests|throttl|quota exceeded|\b429\b|-32029`)
	contentText   = lazyregexp.New(`(?i)secret|credential[- ]shaped|schema|refused before storage|invalid[ _]capsule`)
	authText      = lazyregexp.New(`(?i)\bunauthori[sz]ed\b|\bunauthenticated\b|\bforbidden\b|\bnot authori[sz]ed\b|permission denied|access denied|authentication (failed|required)|\b(invalid|expired|missing|revoked|bad|unknown|wrong) (agent[ _])?(token|credentials?|api[ _]key)\b|\b(token|credentials?) (is |are |has been |have been )?(invalid|expired|revoked|missing|not valid)\b|\b40[13]\b`)
	retryInText   = lazyregexp.New(`(?i)retry[ _-]?after(?:[ _]seconds)?["']?\s*[:=]?\s*(\d+)|(?:retry|try again) in (\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?)\b`)
)

// textOutcome classifies server text; ok is false when it says nothing
// about rate limiting or auth.
func textOutcome(text string) (upstream.Outcome, bool) {
	switch {
	case rateLimitText.MatchString(text):
		return upstream.RateLimited, true
	case contentText.MatchString(text):
		return upstream.Rejected, false
	case authText.MatchString(text):
		return upstream.Unauthorized, true
	}
	return upstream.Rejected, false
}

// retryAfterFromText reads a wait out of rate-limit text.
func retryAfterFromText(text string) time.Duration {
	m := retryInText.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	if m[1] != "" {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return capRetryAfter(time.Duration(min(n, 86400)) * time.Second)
	}
	n, _ := strconv.ParseInt(m[2], 10, 64)
	unit := time.Second
	if strings.HasPrefix(strings.ToLower(m[3]), "m") {
		unit = time.Minute
	}
	return capRetryAfter(time.Duration(min(n, 86400)) * unit)
}

// resultText joins the text content of a tool result.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structuredCode returns a string "code" (or "error.code") of a tool
// result's structured content, or of its text when that is a JSON object,
// when the server gave one.
func structuredCode(res *mcp.CallToolResult) string {
	var m map[string]any
	switch sc := res.StructuredContent.(type) {
	case map[string]any:
		m = sc
	case json.RawMessage:
		_ = json.Unmarshal(sc, &m)
	}
	if m == nil {
		_ = json.Unmarshal([]byte(strings.TrimSpace(resultText(res))), &m)
	}
	if m == nil {
		return ""
	}
	if c, ok := m["code"].(string); ok {
		return sanitize(c, nil)
	}
	if e, ok := m["error"].(map[string]any); ok {
		if c, ok := e["code"].(string); ok {
			return sanitize(c, nil)
		}
	}
	return ""
}

// redactedValue replaces capsule content found in server text.
const redactedValue = "[capsule value]"

// minEchoWord is the shortest word of a capsule value that is scrubbed from
// server text on its own (secrets are long; short words are ordinary text).
const minEchoWord = 8

// sanitize prepares server text for an error message: every capsule value,
// and every long word of one, is replaced, then upstream.CleanMessage
// collapses white space, redacts credential shapes and cuts the result to
// upstream.MaxErrorMessage (200) characters.
func sanitize(s string, sent *capsule.Capsule) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if sent != nil {
		for _, v := range capsuleValues(sent) {
			if len(v) >= 4 {
				s = strings.ReplaceAll(s, v, redactedValue)
			}
		}
		for _, v := range capsuleValues(sent) {
			for _, w := range strings.FieldsFunc(v, func(r rune) bool {
				return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '"' || r == '\'' || r == ','
			}) {
				if len(w) >= minEchoWord {
					s = strings.ReplaceAll(s, w, redactedValue)
				}
			}
		}
	}
	return upstream.CleanMessage(s)
}

// capsuleValues lists a capsule's string values, longest first (so a whole
// value is replaced before any part of it), and its JSON form.
func capsuleValues(c *capsule.Capsule) []string {
	vals := []string{c.Goal, c.Done, c.Next, c.Blockers, c.DoNot, c.Refuted, c.WrittenBy, c.WrittenAt, c.HandoffTo, string(c.TTLDays)}
	vals = append(vals, c.Receipts...)
	if raw, err := json.Marshal(c); err == nil {
		vals = append(vals, string(raw))
	}
	out := vals[:0]
	for _, v := range vals {
		if v != "" {
			out = append(out, v)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
