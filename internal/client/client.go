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
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
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
// milliseconds. Calls that wait by design get what they wait plus this: a
// long poll its max_seconds (20 when not given), a ?sync=1 checkpoint the
// daemon's 10 s for the upstreams.
const DefaultTimeout = 10 * time.Second

// Waits the daemon does by design, for Client.timeout.
const (
	waitDefault = 20 * time.Second
	syncWait    = 10 * time.Second
)

// Client is a connection to one daemon. It is safe for concurrent use.
type Client struct {
	Socket string
	// Agent, when set, is sent as ?agent= on every agent call.
	Agent string
	// Timeout bounds one request (zero: DefaultTimeout), plus what the
	// call waits by design.
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
	return c.do(ctx, c.http, method, path, query, body)
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
	out, err := c.do(ctx, &http.Client{Transport: tr}, method, path, query, body)
	mu.Lock()
	defer mu.Unlock()
	if err == nil && peerErr != nil {
		err = fmt.Errorf("who answers on %s: %w", c.Socket, peerErr)
	}
	return out, peer, err
}

func (c *Client) do(ctx context.Context, hc *http.Client, method, path string, query url.Values, body []byte) ([]byte, error) {
	if query == nil {
		query = url.Values{}
	}
	if c.Agent != "" && query.Get("agent") == "" {
		query.Set("agent", c.Agent)
	}
	u := "http://continuityd" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	timeout := c.timeout(path, query)
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

// timeout is the time one request may take.
func (c *Client) timeout(path string, q url.Values) time.Duration {
	d := c.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	switch path {
	case "/v1/continuity/wait":
		w := waitDefault
		if n, err := strconv.Atoi(q.Get("max_seconds")); err == nil && n > 0 {
			w = time.Duration(min(n, 3600)) * time.Second
		}
		d += w
	case "/v1/continuity/checkpoint":
		if q.Get("sync") != "" {
			d += syncWait
		}
	}
	return d
}

// unreachable reports a request that got no answer: the caller's own
// cancellation as it is, the request's timeout as ErrNoAnswer.
func (c *Client) unreachable(ctx, reqCtx context.Context, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case reqCtx.Err() != nil:
		return fmt.Errorf("%w at %s: %w within %s: something accepts connections there but does not answer (a stuck daemon?)",
			ErrUnreachable, c.Socket, ErrNoAnswer, timeout)
	default:
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Socket, err)
	}
}

// GetJSON sends a GET and decodes the answer into v.
func (c *Client) GetJSON(ctx context.Context, path string, query url.Values, v any) error {
	out, err := c.Do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// Resume reads the agent's resume. peek leaves since_last_visit as it is.
func (c *Client) Resume(ctx context.Context, peek bool) (*capsule.Resume, error) {
	q := url.Values{}
	if peek {
		q.Set("peek", "1")
	}
	var r capsule.Resume
	if err := c.GetJSON(ctx, "/v1/continuity", q, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Signal posts a context signal.
func (c *Client) Signal(ctx context.Context, s *capsule.Signal) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, http.MethodPost, "/v1/signals", nil, body)
	return err
}
