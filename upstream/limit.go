package upstream

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxAnswerBytes bounds the body of any answer read from a remote service
// (Q-Day's, Delx's, and what their SDKs read for them), so a broken or
// hostile server cannot exhaust the daemon's memory.
const MaxAnswerBytes = 1 << 20

// AnswerTooLargeError is what reading an answer's body returns past its
// limit.
type AnswerTooLargeError struct{ Limit int64 }

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes; it is not read further", e.Limit)
}

// LimitBody returns body read through a limit: past limit bytes a read
// fails with an *AnswerTooLargeError (never a silent cut, which a decoder
// could take for a whole answer). Closing it closes body.
func LimitBody(body io.ReadCloser, limit int64) io.ReadCloser {
	return &limitedBody{body: body, left: limit, limit: limit}
}

type limitedBody struct {
	body  io.ReadCloser
	left  int64
	limit int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells an answer of exactly limit bytes from a
		// longer one.
		var one [1]byte
		n, err := l.body.Read(one[:])
		if n > 0 {
			return 0, &AnswerTooLargeError{Limit: l.limit}
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.body.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.body.Close() }

// LimitTransport is an http.RoundTripper whose answers' bodies are read
// through LimitBody: for a client whose answers a library reads (the MCP
// SDK reads a JSON answer whole).
type LimitTransport struct {
	Base  http.RoundTripper
	Limit int64
}

// RoundTrip implements http.RoundTripper.
func (t *LimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = LimitBody(resp.Body, t.Limit)
	return resp, nil
}

// ValidUTF8 returns b with each run of invalid UTF-8 replaced by U+FFFD:
// what a remote service sends is made valid at the door, so what the daemon
// passes on (a resume, an event) is JSON a strict decoder reads.
func ValidUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return []byte(strings.ToValidUTF8(string(b), "\uFFFD"))
}
