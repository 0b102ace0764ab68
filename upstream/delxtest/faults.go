package delxtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault is one scripted misbehaviour, played on one incoming HTTP request.
// Script queues faults; each HTTP request takes the fault at the head of the
// queue if that fault applies to it (see Method), else passes untouched and
// leaves the fault for a later request. Build faults with the helpers below
// or by hand; fields combine as documented.
type Fault struct {
	// Method, if set, limits the fault to POSTs of this JSON-RPC method
	// ("tools/call", "initialize"). RPCCode and ToolError faults apply to
	// JSON-RPC calls only; ToolError to tools/call only.
	Method string

	// Delay holds the request this long (or until the client gives up or
	// the server closes) before the rest of the fault, or before normal
	// handling when the fault has nothing else.
	Delay time.Duration

	// Reset drops the connection without an answer.
	Reset bool
	// Garbage answers 200 application/json with a body that is not JSON.
	Garbage bool
	// Huge answers a tools/call 200 with a tool result whose text makes
	// the body this many bytes (about); negative: a body that never ends
	// (until the client goes). Written as it goes, never held.
	Huge int64

	// RPCCode answers the call with a JSON-RPC error of this code (with
	// HTTP Status, default 200); RetryAfterSeconds > 0 adds
	// data.retry_after_seconds.
	RPCCode           int
	RetryAfterSeconds int
	// Message is the JSON-RPC error message (default "rate limit exceeded"
	// for -32029, else "fault").
	Message string

	// ToolError answers the tools/call with a tool result whose isError is
	// set and whose text is this.
	ToolError string

	// Status answers with this HTTP status (and a small JSON body that is
	// not JSON-RPC, unless RPCCode is set).
	Status int
	// RetryAfter is a Retry-After header value to send ("" sends none).
	RetryAfter string
}

// HTTPStatus answers the next request with status code.
func HTTPStatus(code int) Fault { return Fault{Status: code} }

// TooManyRequests answers 429; retryAfter is the Retry-After header value,
// "" for none.
func TooManyRequests(retryAfter string) Fault {
	return Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}
}

// Slow holds the next request for d, then handles it normally.
func Slow(d time.Duration) Fault { return Fault{Delay: d} }

// Reset drops the next request's connection without an answer.
func Reset() Fault { return Fault{Reset: true} }

// Garbage answers the next request with a body that is not JSON.
func Garbage() Fault { return Fault{Garbage: true} }

// HugeAnswer answers the next tools/call with a body of about n bytes, or
// an endless one for n < 0.
func HugeAnswer(n int64) Fault { return Fault{Huge: n, Method: "tools/call"} }

// RPCError answers the next JSON-RPC call with error code and message in
// an HTTP 200.
func RPCError(code int, message string) Fault { return Fault{RPCCode: code, Message: message} }

// RPCRateLimited answers the next JSON-RPC call with Delx's JSON-RPC rate
// limit error -32029 and data.retry_after_seconds in an HTTP 200.
func RPCRateLimited(retryAfterSeconds int) Fault {
	return Fault{RPCCode: CodeRateLimited, RetryAfterSeconds: retryAfterSeconds}
}

// ToolError answers the next tools/call with a tool error of this text.
func ToolError(text string) Fault { return Fault{ToolError: text, Method: "tools/call"} }

// Script queues faults, played one per incoming HTTP request.
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Pending returns how many scripted faults have not been played yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.faults)
}

// nextFault pops the head fault if it applies to the request.
func (s *Server) nextFault(info rpcInfo) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return Fault{}, false
	}
	f := s.faults[0]
	if f.Method != "" && f.Method != info.method {
		return Fault{}, false
	}
	if (f.RPCCode != 0 || f.ToolError != "" || f.Huge != 0) && !info.isCall {
		return Fault{}, false
	}
	if f.ToolError != "" && info.method != "tools/call" {
		return Fault{}, false
	}
	s.faults = s.faults[1:]
	return f, true
}

// name is the fault's part of a Call's Result ("fault:<name>").
func (f Fault) name() string {
	switch {
	case f.Reset:
		return "reset"
	case f.Garbage:
		return "garbage"
	case f.Huge != 0:
		return "huge"
	case f.RPCCode != 0:
		return "rpc_" + strconv.Itoa(f.RPCCode)
	case f.ToolError != "":
		return "tool_error"
	case f.Status != 0:
		return "http_" + strconv.Itoa(f.Status)
	}
	return "slow"
}

// applyFault plays f; handled is false when the request should go on to
// normal handling (a pure delay that ran its course).
func (s *Server) applyFault(raw http.ResponseWriter, w http.ResponseWriter, r *http.Request, info rpcInfo, f Fault) (handled bool) {
	at := time.Now()
	if f.Delay > 0 {
		if !s.sleep(r.Context(), f.Delay) {
			s.recordHTTP(info, r, at, "fault:slow")
			return true
		}
		if f.name() == "slow" {
			return false
		}
	}
	s.recordHTTP(info, r, at, "fault:"+f.name())
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	switch {
	case f.Reset:
		if err := reset(raw); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	case f.Garbage:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>\n{not json"))
	case f.Huge != 0:
		writeHuge(w, info.id, f.Huge)
	case f.RPCCode != 0:
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		var data any
		if f.RetryAfterSeconds > 0 {
			data = map[string]any{"retry_after_seconds": f.RetryAfterSeconds}
		}
		msg := f.Message
		if msg == "" {
			msg = "fault"
			if f.RPCCode == CodeRateLimited {
				msg = "rate limit exceeded"
			}
		}
		writeRPCError(w, status, info.id, f.RPCCode, msg, data)
	case f.ToolError != "":
		writeJSON(w, http.StatusOK, map[string]any{
			"jsonrpc": "2.0",
			"id":      info.id,
			"result": map[string]any{
				"content": []map[string]any{{"type": "text", "text": f.ToolError}},
				"isError": true,
			},
		})
	case f.Status != 0:
		if f.Status == http.StatusTooManyRequests {
			setRateHeaders(w.Header(), s.opts.Limit, 0, s.opts.Window)
		}
		writeJSON(w, f.Status, map[string]any{"error": map[string]any{
			"code": "HTTP_" + strconv.Itoa(f.Status), "message": http.StatusText(f.Status),
		}})
	}
	return true
}

// writeHuge writes a tool result whose text fills the body to about n bytes
// (endless for n < 0), from one small buffer, until the client goes.
func writeHuge(w http.ResponseWriter, id json.RawMessage, n int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id); err != nil {
		return
	}
	chunk := []byte(strings.Repeat("a", 64<<10))
	for sent := int64(0); n < 0 || sent < n; sent += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte(`"}]}}`))
}
