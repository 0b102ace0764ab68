// Package qday is the `qday` upstream: a client of the Q-Day continuity API
// (qday-continuity(7)). It ships checkpoints with POST
// /v1/continuity/checkpoint, reads the server's view of the agent with GET
// /v1/continuity and long-polls GET /v1/continuity/wait for events.
//
// Every answer is classified with upstream.FromHTTP / FromTransport, so
// the outbox sees Retry, RateLimited (with Retry-After), Unauthorized,
// Stopped (409 RESIDENCY_STOPPED) or Rejected. The client keeps no state
// between calls beyond its connection pool: the outbox owns ordering,
// retries and the rate limit.
package qday

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

// Kind is this upstream's kind in the config.
const Kind = "qday"

// Paths of the API, below the base URL.
const (
	ResumePath     = "/v1/continuity"
	CheckpointPath = "/v1/continuity/checkpoint"
	WaitPath       = "/v1/continuity/wait"
)

// Defaults and limits.
const (
	// DefaultTimeout bounds one request when Options.Timeout is 0.
	DefaultTimeout = 30 * time.Second
	// WaitSlack is added to max_seconds for a wait's own timeout, so the
	// server's "timeout" answer arrives before the client gives up.
	WaitSlack = 15 * time.Second
	// MinWaitSeconds and MaxWaitSeconds bound max_seconds (the seed's
	// 1..90); Wait clamps to them.
	MinWaitSeconds = 1
	MaxWaitSeconds = 90
	// MaxAnswerBytes bounds the body of an answer that is read, so a
	// broken or hostile server cannot exhaust memory.
	MaxAnswerBytes = upstream.MaxAnswerBytes
	// DefaultUserAgent is sent when Options.UserAgent is empty.
	DefaultUserAgent = "continuityd"
)

// Options configures a Client.
type Options struct {
	// Name is the [upstream.NAME] this client was configured as.
	Name string
	// URL is the API's base URL, e.g. https://host or https://host/prefix;
	// a trailing slash is ignored. It carries no credentials, query or
	// fragment.
	URL string
	// Token returns the bearer token. It is called for every request, so a
	// reloaded token applies at once. Surrounding white space is trimmed.
	Token func() (string, error)
	// Timeout bounds one request (default 30s). Wait uses max_seconds+15s
	// instead.
	Timeout time.Duration
	// Client, when set, is used as is (tests). The default has dial, TLS
	// and idle timeouts, ignores proxy environment variables and does not
	// follow redirects.
	Client *http.Client
	// RootCAs, when set, are the only CAs its TLS is trusted with
	// (ca_file); the system's otherwise. Not used with Client.
	RootCAs *x509.CertPool
	// UserAgent is sent as User-Agent (default "continuityd").
	UserAgent string
}

// Client is the Q-Day upstream. It is safe for concurrent use.
type Client struct {
	name    string
	base    string // scheme://host[:port][/prefix], no trailing slash
	token   func() (string, error)
	timeout time.Duration
	hc      *http.Client
	ua      string
}

var (
	_ upstream.Upstream = (*Client)(nil)
	_ upstream.Resumer  = (*Client)(nil)
	_ upstream.Waiter   = (*Client)(nil)
)

// New checks o and returns a Client. It does no network I/O.
func New(o Options) (*Client, error) {
	if strings.TrimSpace(o.Name) == "" {
		return nil, errors.New("qday: the upstream needs a name")
	}
	if o.Token == nil {
		return nil, fmt.Errorf("qday: upstream %s: no token source", o.Name)
	}
	base, err := parseBase(o.URL)
	if err != nil {
		return nil, fmt.Errorf("qday: upstream %s: %w", o.Name, err)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("qday: upstream %s: negative timeout %v", o.Name, o.Timeout)
	}
	c := &Client{
		name:    o.Name,
		base:    base,
		token:   o.Token,
		timeout: o.Timeout,
		hc:      o.Client,
		ua:      o.UserAgent,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient(o.RootCAs)
	}
	if c.ua == "" {
		c.ua = DefaultUserAgent
	}
	return c, nil
}

// parseBase checks a base URL and returns it without a trailing slash.
func parseBase(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("url is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input; a URL may hold a credential by
		// mistake, so say only what is wrong with it.
		return "", errors.New("url does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("url must start with https:// (or http://)")
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", errors.New("url has no host")
	}
	if u.User != nil {
		return "", errors.New("url must not carry credentials; use token_env or token_file")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", errors.New("url must not carry a query or a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", errors.New("url has a bad port")
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u.String(), nil
}

// defaultHTTPClient has bounded dial, TLS handshake and idle times and no
// proxy from the environment: a daemon's traffic goes where its config
// says. Redirects are not followed (FromHTTP classifies a 3xx as Retry), so
// the token is never sent anywhere else.
func defaultHTTPClient(roots *x509.CertPool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:       nil,
		DialContext: dialer.DialContext,
		// One connection per call. Go's transport silently re-sends a
		// request carrying Idempotency-Key when a reused connection dies
		// before the answer; that second call would bypass the outbox's
		// rate limiter, and "never faster than rate and burst" is a
		// promise. At the few calls a second an upstream allows, a
		// handshake per call costs nothing that matters.
		DisableKeepAlives:      true,
		ForceAttemptHTTP2:      false,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           8,
		MaxIdleConnsPerHost:    4,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Name implements upstream.Upstream.
func (c *Client) Name() string { return c.name }

// Kind implements upstream.Upstream.
func (c *Client) Kind() string { return Kind }

// Accepts implements upstream.Upstream: Q-Day takes checkpoints, and of a
// work record only the private working_state summary it carries.
func (c *Client) Accepts(k capsule.WriteKind) bool {
	return k == capsule.WriteCheckpoint || k == capsule.WriteWork
}

// CloseIdleConnections closes the connections the client keeps for reuse
// (at shutdown, or when the configuration changes).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Deliver implements upstream.Upstream: it POSTs w's checkpoint with w's
// Idempotency-Key. The agent is the one the token belongs to; Q-Day knows
// it from the token, so agent is not sent.
func (c *Client) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	if w.Kind == capsule.WriteWork {
		// A work record goes to Q-Day only as the summary its contract
		// allows (working_state.last_result and result_ref), which the
		// record leaves out when the agent described the work itself.
		if w.Checkpoint == nil {
			return nil
		}
		w.Kind = capsule.WriteCheckpoint
	}
	if w.Kind != capsule.WriteCheckpoint {
		return &upstream.Error{Outcome: upstream.Rejected,
			Err: fmt.Errorf("qday takes checkpoints, not %s writes", w.Kind)}
	}
	if w.Checkpoint == nil {
		return &upstream.Error{Outcome: upstream.Rejected, Err: errors.New("checkpoint write without a checkpoint")}
	}
	body, err := json.Marshal(w.Checkpoint)
	if err != nil {
		return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("encoding the checkpoint: %w", err)}
	}
	// The sequence numbers the call covers (a run the outbox merged, or
	// one write) let an operator match upstream records to the local log.
	seqs := strconv.FormatUint(w.Seq, 10)
	if w.CoveredFrom != 0 {
		seqs = strconv.FormatUint(w.CoveredFrom, 10) + "-" + seqs
	}
	a, err := c.do(ctx, http.MethodPost, CheckpointPath, "", body, w.IdempotencyKey, c.timeout, http.Header{SeqsHeader: {seqs}})
	if err != nil {
		return err
	}
	if e := a.classify(); e != nil {
		return e
	}
	// A 2xx is the server's word that it saved the checkpoint; the body is
	// only an echo of the saved state, which continuityd does not use. So
	// a 2xx whose body is garbage, too big or cut short still counts as
	// delivered: retrying would send the write again on a guess and,
	// should the server not honour Idempotency-Key, apply it twice. (A
	// server that answers 200 without saving is lying in a way no client
	// can see; qdaytest.Garbage200 plays one.)
	return nil
}

// Resume implements upstream.Resumer: GET /v1/continuity, the server's
// view of the agent, as the JSON object it sent.
func (c *Client) Resume(ctx context.Context, agent string) (json.RawMessage, error) {
	return c.getObject(ctx, ResumePath, "", c.timeout)
}

// Wait implements upstream.Waiter: GET /v1/continuity/wait, holding the
// request for up to maxSeconds (clamped to 1..90) plus WaitSlack. It
// returns the server's answer as is ({"woke":"event"|"timeout",…}).
func (c *Client) Wait(ctx context.Context, agent string, maxSeconds int) (json.RawMessage, error) {
	n := min(max(maxSeconds, MinWaitSeconds), MaxWaitSeconds)
	q := url.Values{"max_seconds": {strconv.Itoa(n)}}.Encode()
	return c.getObject(ctx, WaitPath, q, time.Duration(n)*time.Second+WaitSlack)
}

// getObject GETs path and returns its body, which must be a JSON object.
func (c *Client) getObject(ctx context.Context, path, query string, timeout time.Duration) (json.RawMessage, error) {
	a, err := c.do(ctx, http.MethodGet, path, query, nil, "", timeout, nil)
	if err != nil {
		return nil, err
	}
	if e := a.classify(); e != nil {
		return nil, e
	}
	if a.readErr != nil {
		return nil, &upstream.Error{Outcome: upstream.Retry, Status: a.status, Err: a.readErr}
	}
	b := bytes.TrimSpace(a.body)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, &upstream.Error{Outcome: upstream.Retry, Status: a.status,
			Err: errors.New("the answer is not a JSON object")}
	}
	return json.RawMessage(b), nil
}

// answer is an HTTP answer as read.
type answer struct {
	status  int
	header  http.Header
	body    []byte // at most MaxAnswerBytes
	readErr error  // reading the body failed or it was too large
	token   string // to scrub from the upstream's message
}

// classify applies upstream.FromHTTP, then scrubs the token from the
// upstream's message in case the server echoed it.
func (a *answer) classify() *upstream.Error {
	body := a.body
	if a.readErr != nil {
		body = nil // a cut or oversized body is not parsed
	}
	e := upstream.FromHTTP(a.status, a.header, body, time.Now())
	if e != nil && e.Err != nil && a.token != "" && strings.Contains(e.Err.Error(), a.token) {
		e.Err = errors.New(strings.ReplaceAll(e.Err.Error(), a.token, "[redacted]"))
	}
	return e
}

// do sends one request and reads its answer. Failing to get an answer is
// an *upstream.Error (Unauthorized for a token that cannot be had, Retry
// for the transport).
// SeqsHeader carries the local sequence numbers a checkpoint call covers:
// "12", or "9-12" for a merged run.
const SeqsHeader = "X-Continuityd-Seqs"

func (c *Client) do(ctx context.Context, method, path, query string, body []byte, idemKey string, timeout time.Duration, extra http.Header) (*answer, error) {
	tok, err := c.bearer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	u := c.base + path
	if query != "" {
		u += "?" + query
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, &upstream.Error{Outcome: upstream.Retry, Err: fmt.Errorf("building the request: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, upstream.FromTransport(err)
	}
	defer resp.Body.Close()
	a := &answer{status: resp.StatusCode, header: resp.Header, token: tok}
	a.body, a.readErr = io.ReadAll(upstream.LimitBody(resp.Body, MaxAnswerBytes))
	var tooLarge *upstream.AnswerTooLargeError
	if a.readErr != nil && !errors.As(a.readErr, &tooLarge) {
		a.readErr = fmt.Errorf("reading the answer: %w", a.readErr)
	}
	return a, nil
}

// bearer calls the token source and checks what it returns. The token is
// never put in an error.
func (c *Client) bearer() (string, error) {
	tok, err := c.token()
	if err != nil {
		return "", &upstream.Error{Outcome: upstream.Unauthorized, Err: fmt.Errorf("reading the token: %w", err)}
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", &upstream.Error{Outcome: upstream.Unauthorized, Err: errors.New("the token is empty")}
	}
	for i := 0; i < len(tok); i++ {
		if b := tok[i]; b < 0x21 || b > 0x7e {
			return "", &upstream.Error{Outcome: upstream.Unauthorized,
				Err: errors.New("the token holds a character a bearer token cannot carry")}
		}
	}
	return tok, nil
}
