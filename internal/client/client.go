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
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// ErrUnreachable wraps every failure to reach the daemon at all (no socket,
// nobody listening, connection reset): the CLI maps it to exit status 3.
var ErrUnreachable = errors.New("daemon unreachable")

// Client is a connection to one daemon. It is safe for concurrent use.
type Client struct {
	Socket string
	// Agent, when set, is sent as ?agent= on every agent call.
	Agent string
	http  *http.Client
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

// NewWithTransport returns a client that sends its requests through rt (the
// daemon's own /mcp endpoint reaches its handler in-process this way).
func NewWithTransport(name string, rt http.RoundTripper) *Client {
	return &Client{Socket: name, http: &http.Client{Transport: rt}}
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
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Socket, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %v", ErrUnreachable, err)
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
