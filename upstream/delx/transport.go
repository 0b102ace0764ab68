package delx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
)

// agentTransport adds one agent's credential, the Accept header and the
// call's idempotency key to every request the SDK sends, and reports what
// the server answered to the call's probe (see probe). The credential is
// the identity of the call the request belongs to, else (a request the SDK
// sends outside a call, such as the session's DELETE) the latest call's.
type agentTransport struct {
	base http.RoundTripper
	conn *agentConn
}

// errToken is the cause of a call that was not sent because the identity
// could not be read or is unusable. Its text never carries the token.
type errToken struct{ cause string }

func (e *errToken) Error() string { return "no usable delx identity: " + e.cause }

// RoundTrip implements http.RoundTripper. The request is cloned, never
// modified (as RoundTripper requires).
func (t *agentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	p := probeFrom(ctx)
	id, ok := identityFrom(ctx)
	if !ok {
		if last := t.conn.last.Load(); last != nil {
			id = *last
		}
	}
	var terr *errToken
	if err := id.check(); err != nil {
		terr = &errToken{cause: err.Error()}
	}
	if terr != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		if p != nil && req.Method == http.MethodPost {
			p.observe(nil, terr)
		}
		return nil, terr
	}
	r := req.Clone(ctx)
	r.Header.Set(HeaderAgentID, id.AgentID)
	r.Header.Set(HeaderAgentToken, id.Token)
	if !acceptsJSON(r.Header.Values("Accept")) {
		r.Header.Set("Accept", acceptHeader)
	}
	if key := idempotencyKeyFrom(ctx); key != "" && r.Method == http.MethodPost && validHeaderValue(key) {
		r.Header.Set(HeaderIdempotencyKey, key)
	}
	resp, err := t.base.RoundTrip(r)
	if p != nil && r.Method == http.MethodPost {
		p.observe(resp, err)
	}
	return resp, err
}

// acceptsJSON reports whether Accept values include application/json.
func acceptsJSON(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
				return true
			}
		}
	}
	return false
}

// validHeaderValue reports whether s can travel as a header value as is:
// visible ASCII and spaces, no line breaks.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b > 0x7e {
			return false
		}
	}
	return true
}

// A probe records what the HTTP layer saw for one call (or one connect):
// the first POST that failed, with its status, headers and the start of its
// body, or its transport error. The SDK reduces HTTP failures to text
// (http.StatusText) and does not decode the body of a 429 or 5xx, so this is
// where the status, Retry-After and a JSON-RPC error body of a 429 are read.
type probe struct {
	mu     sync.Mutex
	seen   bool // a failure was recorded, or the probe was finished
	status int
	header http.Header
	body   []byte
	err    error
}

// maxProbeBody bounds how much of a failed answer's body is kept.
const maxProbeBody = 64 << 10

func (p *probe) observe(resp *http.Response, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen {
		return
	}
	if err != nil {
		p.seen, p.err = true, err
		return
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return
	}
	p.seen, p.status, p.header = true, resp.StatusCode, resp.Header.Clone()
	// Keep the body for the classification and hand the SDK a copy.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	resp.Body.Close()
	p.body = b
	resp.Body = io.NopCloser(bytes.NewReader(b))
}

// finish stops recording: requests that outlive their call (the SDK's
// notifications/cancelled, answers to server requests on a connect's
// context) must not be read into a probe nobody reads.
func (p *probe) finish() {
	p.mu.Lock()
	p.seen = true
	p.mu.Unlock()
}

// snapshot returns what the probe saw.
func (p *probe) snapshot() (status int, header http.Header, body []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.header, p.body, p.err
}

type probeKey struct{}
type idempotencyKey struct{}
type identityKey struct{}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

func withProbe(ctx context.Context, p *probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

func probeFrom(ctx context.Context) *probe {
	p, _ := ctx.Value(probeKey{}).(*probe)
	return p
}

func withIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

func idempotencyKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// isTokenError reports whether err is (or wraps) a refusal to send for want
// of a usable token.
func isTokenError(err error) bool {
	var te *errToken
	return errors.As(err, &te)
}
