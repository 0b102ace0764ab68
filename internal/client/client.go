// Package client talks to a running continuityd over its Unix socket: the
// CLI's client commands, the hook and statusline commands and the stdio MCP
// server all use it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// ErrUnreachable wraps every failure to reach the daemon at all (no socket,
// nobody listening, connection reset): the CLI maps it to exit status 3.
var ErrUnreachable = errors.New("daemon unreachable")

// ErrNoAnswer is the unreachable case where the socket takes the connection
// but no answer comes within the request's timeout (a stuck daemon, or
// something else listening there). It always comes with ErrUnreachable.
var ErrNoAnswer = errors.New("no answer")

// DefaultTimeout bounds one request: the daemon answers ordinary calls in
// milliseconds. Calls that wait by design (a long poll, a synced
// checkpoint) get what they wait plus this: DoWaiting.
const DefaultTimeout = 10 * time.Second

// Client is a connection to one daemon. It is safe for concurrent use.
type Client struct {
	Socket string
	// Agent, when set, is sent as ?agent= on every agent call.
	Agent string
	// Cwd, when set and Agent is not, is sent as ?cwd= on every call
	// that names neither: the daemon acts on the place that holds it.
	Cwd string
	// Timeout bounds one request (zero: DefaultTimeout), plus what the
	// call waits by design (DoWaiting's wait).
	Timeout time.Duration
	http    *http.Client
}

// New returns a client for the daemon listening on socket.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// NewVia returns a client whose requests go through rt instead of the
// socket: the daemon's own MCP sessions reach its API so, in process,
// through the very handler the socket serves. where names what answers,
// in errors (the Socket field).
func NewVia(rt http.RoundTripper, where string) *Client {
	return &Client{Socket: where, http: &http.Client{Transport: rt}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// APIError is an error answer from the daemon, in the interface's shape.
type APIError struct {
	Status  int
	Code    string
	Field   string
	Message string
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%d %s: %s: %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Do sends a request and returns the status and body of a 2xx answer; a
// non-2xx answer is an *APIError, a failure to connect wraps ErrUnreachable.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	return c.do(ctx, c.http, 0, method, path, query, body)
}

// DoWaiting is Do for a call that waits by design (a long poll, a synced
// checkpoint): its timeout is the client's plus wait. Package ops knows
// what each operation waits.
func (c *Client) DoWaiting(ctx context.Context, wait time.Duration, method, path string, query url.Values, body []byte) ([]byte, error) {
	return c.do(ctx, c.http, wait, method, path, query, body)
}

// DoPeer is Do over a connection of its own, and says who answered: the
// kernel's credentials of the process listening at the other end of that
// very connection. A caller that acts on what the answer claims (signals
// the PID a status names) checks the claim against them, since anything
// may be listening on a socket path.
func (c *Client) DoPeer(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, safesocket.Cred, error) {
	var mu sync.Mutex // a dial may finish after a cancelled request returned
	var peer safesocket.Cred
	peerErr := errors.New("no connection was made")
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", c.Socket)
			if err != nil {
				return nil, err
			}
			cred, err := safesocket.PeerCred(conn)
			mu.Lock()
			peer, peerErr = cred, err
			mu.Unlock()
			return conn, nil
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	out, err := c.do(ctx, &http.Client{Transport: tr}, 0, method, path, query, body)
	mu.Lock()
	defer mu.Unlock()
	if err == nil && peerErr != nil {
		err = fmt.Errorf("who answers on %s: %w", c.Socket, peerErr)
	}
	return out, peer, err
}

func (c *Client) do(ctx context.Context, hc *http.Client, wait time.Duration, method, path string, query url.Values, body []byte) ([]byte, error) {
	if query == nil {
		query = url.Values{}
	}
	if c.Agent != "" && query.Get("agent") == "" {
		query.Set("agent", c.Agent)
	}
	if c.Agent != "" || c.Cwd == "" || query.Get("agent") != "" || query.Get("cwd") != "" {
		return c.doOnce(ctx, hc, wait, method, path, query, body)
	}
	// The place the current directory lies in; when it lies in none, the
	// daemon's only agent, as without a directory: the refusal (which
	// names the places, and why this directory is none) stands when the
	// daemon serves several.
	query.Set("cwd", c.Cwd)
	out, err := c.doOnce(ctx, hc, wait, method, path, query, body)
	if !agentRequired(err) {
		return out, err
	}
	query.Del("cwd")
	if out2, err2 := c.doOnce(ctx, hc, wait, method, path, query, body); !agentRequired(err2) {
		return out2, err2
	}
	return out, err
}

// agentRequired reports whether err is the daemon's refusal to pick an
// agent for a request that named none.
func agentRequired(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == capsule.CodeAgentRequired
}

func (c *Client) doOnce(ctx context.Context, hc *http.Client, wait time.Duration, method, path string, query url.Values, body []byte) ([]byte, error) {
	u := "http://continuityd" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	timeout := c.timeout(wait)
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, reqCtx, timeout, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, c.unreachable(ctx, reqCtx, timeout, fmt.Errorf("reading the answer: %w", err))
	}
	if resp.StatusCode/100 != 2 {
		ae := &APIError{Status: resp.StatusCode}
		var eb struct {
			Error capsule.Error `json:"error"`
		}
		if json.Unmarshal(out, &eb) == nil && eb.Error.Code != "" {
			ae.Code, ae.Field, ae.Message = eb.Error.Code, eb.Error.Field, eb.Error.Message
		} else {
			ae.Code, ae.Message = fmt.Sprintf("HTTP_%d", resp.StatusCode), string(out)
		}
		return out, ae
	}
	return out, nil
}

// timeout is the time one request may take: the client's bound plus what
// the call waits by design.
func (c *Client) timeout(wait time.Duration) time.Duration {
	d := c.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return d + wait
}

// unreachable reports a request that got no answer: the caller's own
// cancellation as it is, the request's timeout as ErrNoAnswer.
func (c *Client) unreachable(ctx, reqCtx context.Context, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case reqCtx.Err() != nil:
		return &UnreachableError{Socket: c.Socket, NoAnswer: true, Within: timeout,
			Reason: fmt.Sprintf("no answer within %s: something accepts connections there but does not answer (a stuck daemon?)", timeout)}
	default:
		return &UnreachableError{Socket: c.Socket, Reason: dialReason(err)}
	}
}

// UnreachableError is a daemon that could not be reached: where, and why
// in words. It is ErrUnreachable, and ErrNoAnswer when NoAnswer.
type UnreachableError struct {
	Socket, Reason string
	NoAnswer       bool          // the connection was taken, and no answer came
	Within         time.Duration // how long an answer was waited for (NoAnswer)
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%v at %s: %s", ErrUnreachable, e.Socket, e.Reason)
}

func (e *UnreachableError) Is(target error) bool {
	return target == ErrUnreachable || e.NoAnswer && target == ErrNoAnswer
}

// dialReason says in words why a connection to the socket failed: what a
// person can act on, not the HTTP client's "Get "http://continuityd/…":
// dial unix …" that wraps it.
func dialReason(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no socket there (is the daemon running?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listens there (a daemon that stopped?)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied (the socket is another user's, or its directory is closed to you)"
	case errors.Is(err, syscall.ENOTDIR):
		return "a part of the path is not a directory"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before an answer came"
	case errors.As(err, &errno):
		return errno.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
