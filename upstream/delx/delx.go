// Package delx is the `delx` upstream: it ships an agent's capsules, seals
// and session ends to Delx (Continuity Capsule v1) over MCP Streamable HTTP,
// using the official MCP Go SDK, and reads Delx's own view of the agent back
// for resume.
//
// Mapping of writes to Delx tools:
//
//	capsule, capsule_seal -> leave_hive_note {session_id, capsule, agent_id, fleet_id?, invite_token?}
//	session_end           -> close_session   {session_id, capsule?, reason?}
//	Resume                -> resume_session  {agent_id, lookback_days: 30}
//	ReadMember            -> resume_session  {agent_id: the member, lookback_days: 30, fleet_id, invite_token?}
//
// fleet_id and invite_token are sent when the agent's identity names a
// Delx fleet (Identity.FleetID): what Delx publishes of fleets is that
// they are the one exception to a capsule's privacy, for members who
// joined with an invite token; where the two travel is assumed
// (docs/DELX.md).
//
// Each agent has its own Delx identity (Identity: agent_id, session_id,
// token), as Delx's registration issues one per agent: Options.Identity
// gives it at the start of every call, so a new registration or a rotated
// token applies at once, even on an existing MCP session (one whose
// agent_id changed is closed and connected again).
//
// Wire details:
//
//   - The credential travels as the headers x-delx-agent-id and
//     x-delx-agent-token on every HTTP request (POST, DELETE), never in the
//     URL or in tool arguments. Redirects to another host are not
//     followed, so the headers never leave the configured host.
//   - Every request carries Accept: application/json, text/event-stream
//     (Delx answers 406 without application/json).
//   - A write's IdempotencyKey goes out twice: as an Idempotency-Key HTTP
//     header on the tools/call POST (the convention HTTP gateways and APIs
//     dedupe on, scoped to that one request, not the handshake), and as
//     _meta.idempotency_key in the tools/call request (it travels with the
//     JSON-RPC message itself, so it reaches the tool handler through MCP
//     proxies that drop unknown headers; servers ignore _meta keys they do
//     not know). A retry sends the same key both ways.
//   - net/http replays a request that carries an Idempotency-Key header
//     once, by itself, when a reused keep-alive connection dies under it
//     before any answer; the server sees the same key twice, which is what
//     the key is for.
//   - One MCP client session per agent, connected lazily on first use with
//     the legacy initialize handshake (protocol 2025-11-25; see
//     protocolVersion), without the standalone SSE GET stream and without
//     SSE resumption, so one Deliver costs one HTTP request (three when it
//     has to connect first, one more for the DELETE of a dropped session).
//     A session is dropped, and the next call reconnects, when the SDK
//     connection is broken or its state unknown: connection refused or
//     reset, an unreadable answer, a server that forgot the session (404),
//     or a status the SDK treats as fatal (a 4xx without a JSON-RPC body,
//     401 and 403 included). After a 429, a 5xx, a JSON-RPC error, a tool
//     error or a timeout the session is kept.
//   - A session end is sent as close_session on the same Delx session_id
//     as the hive notes (the identity's); the write's own SessionID is the
//     agent's, not Delx's, and is not sent.
//   - Close must be called: it closes the MCP sessions (DELETE) and the
//     idle connections of the transport it made.
//
// Errors come back as *upstream.Error; see errors.go for the mapping.
package delx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

// Kind is this upstream's kind in the config.
const Kind = "delx"

// Header names and protocol constants Delx uses.
const (
	HeaderAgentID        = "x-delx-agent-id"
	HeaderAgentToken     = "x-delx-agent-token"
	HeaderIdempotencyKey = "Idempotency-Key"
	// MetaIdempotencyKey is the _meta key of tools/call requests that carries
	// the write's idempotency key.
	MetaIdempotencyKey = "idempotency_key"
	// CodeRateLimited is Delx's JSON-RPC error code for rate limiting; its
	// data carries retry_after_seconds.
	CodeRateLimited = -32029
)

// Delx tools.
const (
	ToolLeaveHiveNote = "leave_hive_note"
	ToolCloseSession  = "close_session"
	ToolResumeSession = "resume_session"
)

// Defaults.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultLookbackDays = 30
	acceptHeader        = "application/json, text/event-stream"
	// protocolVersion pins the MCP protocol version offered in initialize.
	// The SDK's default (2026-07-28) first tries the stateless
	// server/discover call and falls back to initialize when the server does
	// not know it: against a server speaking the widely deployed versions
	// (Delx publishes nothing newer) that is one wasted, rate-limited request
	// per connection. The server may still negotiate an older version.
	protocolVersion = "2025-11-25"
)

// Options configures a Client.
type Options struct {
	Name string // the [upstream.NAME]
	URL  string // the MCP endpoint, e.g. https://api.delx.ai/v1/mcp
	// Identity returns the continuityd agent's Delx identity. It is called
	// at the start of every call. An error (whose text must not hold a
	// secret) or an incomplete identity fails the call as Unauthorized
	// without sending anything.
	Identity func(agent string) (Identity, error)
	// Timeout bounds one call, connecting included (default 30s).
	Timeout time.Duration
	// HTTPClient is optional (tests). Its Transport is wrapped to add the
	// credential headers; its Jar is not used.
	HTTPClient *http.Client
	// RootCAs, when set, are the only CAs its TLS is trusted with
	// (ca_file); the system's otherwise. Not used with HTTPClient.
	RootCAs *x509.CertPool
}

// Client is the Delx upstream. It implements upstream.Upstream and
// upstream.Resumer and is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	identity func(string) (Identity, error)
	timeout  time.Duration

	base          http.RoundTripper
	ownTransport  *http.Transport // created here, so closed here
	clientTimeout time.Duration
	checkRedirect func(*http.Request, []*http.Request) error
	mcp           *mcp.Client

	mu     sync.Mutex
	agents map[string]*agentConn
	closed bool
	bg     sync.WaitGroup // closes of dropped sessions
}

// agentConn is one agent's lazily connected MCP session.
type agentConn struct {
	mu      sync.Mutex // serializes connecting
	http    *http.Client
	cs      *mcp.ClientSession
	agentID string // the Delx agent_id cs was connected as
	// last is the identity of the latest call: what requests sent outside a
	// call (the session's DELETE) carry.
	last atomic.Pointer[Identity]
}

var (
	_ upstream.Upstream     = (*Client)(nil)
	_ upstream.Resumer      = (*Client)(nil)
	_ upstream.MemberReader = (*Client)(nil)
)

// New checks o and returns a Client. It does no I/O: sessions connect on
// first use.
func New(o Options) (*Client, error) {
	if o.Name == "" {
		return nil, errors.New("delx: a name is required")
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("delx %s: the url must be an absolute http(s) URL", o.Name)
	}
	if u.User != nil {
		// Credentials go in headers, never in a URL (and the URL is logged).
		return nil, fmt.Errorf("delx %s: the url must not carry credentials; use the token", o.Name)
	}
	if o.Identity == nil {
		return nil, fmt.Errorf("delx %s: an identity source is required", o.Name)
	}
	c := &Client{
		name:     o.Name,
		endpoint: o.URL,
		identity: o.Identity,
		timeout:  o.Timeout,
		agents:   make(map[string]*agentConn),
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if o.HTTPClient != nil {
		c.base = o.HTTPClient.Transport
		c.clientTimeout = o.HTTPClient.Timeout
		c.checkRedirect = o.HTTPClient.CheckRedirect
	}
	if c.base == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			c.ownTransport = dt.Clone()
			// One connection per call: Go's transport re-sends a request
			// carrying Idempotency-Key when a reused connection dies, and
			// that second call would bypass the outbox's rate limiter.
			c.ownTransport.DisableKeepAlives = true
			if o.RootCAs != nil {
				c.ownTransport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs}
			}
			c.base = c.ownTransport
		} else {
			c.base = http.DefaultTransport
		}
	}
	// The SDK reads a JSON answer whole: its body is read through the
	// limit every remote answer has.
	c.base = &upstream.LimitTransport{Base: c.base, Limit: upstream.MaxAnswerBytes}
	if own := c.checkRedirect; own != nil {
		// The caller's policy applies within the host only.
		c.checkRedirect = func(req *http.Request, via []*http.Request) error {
			if err := sameHostRedirects(req, via); err != nil {
				return err
			}
			return own(req, via)
		}
	} else {
		c.checkRedirect = sameHostRedirects
	}
	c.mcp = mcp.NewClient(&mcp.Implementation{Name: "continuityd", Version: "1"}, &mcp.ClientOptions{
		// A delivery client serves nothing back: no roots, no sampling.
		Capabilities: &mcp.ClientCapabilities{},
	})
	return c, nil
}

// sameHostRedirects follows a redirect only within the original host, so the
// credential headers (added to every request) never reach another host.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return http.ErrUseLastResponse
	}
	return nil
}

// Name implements upstream.Upstream.
func (c *Client) Name() string { return c.name }

// Kind implements upstream.Upstream.
func (c *Client) Kind() string { return Kind }

// Accepts implements upstream.Upstream: Delx takes capsules, seals and
// session ends.
func (c *Client) Accepts(k capsule.WriteKind) bool {
	switch k {
	case capsule.WriteCapsule, capsule.WriteSeal, capsule.WriteSessionEnd:
		return true
	}
	return false
}

// Deliver implements upstream.Upstream.
func (c *Client) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	id, err := c.identityOf(agent)
	if err != nil {
		return err
	}
	var (
		tool string
		args = map[string]any{"session_id": id.SessionID}
	)
	switch w.Kind {
	case capsule.WriteCapsule, capsule.WriteSeal:
		if w.Capsule == nil {
			return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("a %s write without a capsule", w.Kind)}
		}
		raw, err := json.Marshal(w.Capsule)
		if err != nil {
			return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("encoding the capsule: %w", err)}
		}
		tool = ToolLeaveHiveNote
		args["capsule"] = json.RawMessage(raw)
		args["agent_id"] = id.AgentID
		id.fleetArgs(args)
	case capsule.WriteSessionEnd:
		tool = ToolCloseSession
		if w.Capsule != nil {
			raw, err := json.Marshal(w.Capsule)
			if err != nil {
				return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("encoding the capsule: %w", err)}
			}
			args["capsule"] = json.RawMessage(raw)
		}
		if w.Reason != "" {
			args["reason"] = w.Reason
		}
	default:
		return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("delx does not take %s writes", w.Kind)}
	}
	_, err = c.call(ctx, agent, id, tool, args, w.IdempotencyKey, w.Capsule)
	return err
}

// identityOf returns the agent's identity, or the Unauthorized error that
// fails the call without sending anything.
func (c *Client) identityOf(agent string) (Identity, error) {
	id, err := c.identity(agent)
	if err == nil {
		if cerr := id.check(); cerr != nil {
			err = fmt.Errorf("agent %s's Delx identity: %w", agent, cerr)
		}
	}
	if err != nil {
		return Identity{}, &upstream.Error{Outcome: upstream.Unauthorized, Err: &errToken{cause: err.Error()}}
	}
	return id, nil
}

// Resume implements upstream.Resumer: resume_session for the agent over the
// last DefaultLookbackDays days. The answer is the tool result as raw JSON
// (resultJSON).
func (c *Client) Resume(ctx context.Context, agent string) (json.RawMessage, error) {
	id, err := c.identityOf(agent)
	if err != nil {
		return nil, err
	}
	res, err := c.call(ctx, agent, id, ToolResumeSession, map[string]any{
		"agent_id":      id.AgentID,
		"lookback_days": DefaultLookbackDays,
	}, "", nil)
	if err != nil {
		return nil, err
	}
	return resultJSON(res), nil
}

// ReadMember implements upstream.MemberReader: resume_session for member
// (a fellow member's Delx agent_id) with the agent's fleet_id (and invite
// token, when it has one), over the last DefaultLookbackDays days. Delx
// answers only when both are members of the fleet; the answer is
// resume_session's, as Resume returns it.
func (c *Client) ReadMember(ctx context.Context, agent, member string) (json.RawMessage, error) {
	id, err := c.identityOf(agent)
	if err != nil {
		return nil, err
	}
	if id.FleetID == "" {
		return nil, upstream.ErrNoFleet
	}
	args := map[string]any{"agent_id": member, "lookback_days": DefaultLookbackDays}
	id.fleetArgs(args)
	res, err := c.call(ctx, agent, id, ToolResumeSession, args, "", nil)
	if err != nil {
		return nil, err
	}
	return resultJSON(res), nil
}

// fleetArgs adds the fleet's arguments to a call's: fleet_id, and the
// invite token that joins the agent to it.
func (id Identity) fleetArgs(args map[string]any) {
	if id.FleetID == "" {
		return
	}
	args["fleet_id"] = id.FleetID
	if id.InviteToken != "" {
		args["invite_token"] = id.InviteToken
	}
}

// resultJSON is a tool result as raw JSON: its structured content when it
// has some, else its text when that is JSON, else the text as a JSON
// string.
func resultJSON(res *mcp.CallToolResult) json.RawMessage {
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			return raw
		}
	}
	text := resultText(res)
	if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	raw, _ := json.Marshal(text)
	return raw
}

// Close closes every agent's MCP session (each sends its DELETE) and waits
// for sessions dropped earlier to finish closing. Calls after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := make([]*agentConn, 0, len(c.agents))
	for _, ac := range c.agents {
		conns = append(conns, ac)
	}
	c.mu.Unlock()
	var errs []error
	for _, ac := range conns {
		ac.mu.Lock()
		cs := ac.cs
		ac.cs = nil
		ac.mu.Unlock()
		if cs != nil {
			if err := cs.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.bg.Wait()
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

var errClosed = errors.New("the delx client is closed")

// conn returns the agent's connection record, creating it on first use.
func (c *Client) conn(agent string) (*agentConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	ac := c.agents[agent]
	if ac == nil {
		ac = &agentConn{}
		ac.http = &http.Client{
			Transport:     &agentTransport{base: c.base, conn: ac},
			CheckRedirect: c.checkRedirect,
			Timeout:       c.clientTimeout,
		}
		c.agents[agent] = ac
	}
	return ac, nil
}

// session returns the agent's MCP session for identity id, connecting it
// if needed. A session connected under another agent_id (the agent was
// registered again) is closed and a new one connected.
func (c *Client) session(ctx context.Context, agent string, id Identity) (*mcp.ClientSession, error) {
	ac, err := c.conn(agent)
	if err != nil {
		return nil, &upstream.Error{Outcome: upstream.Retry, Err: err}
	}
	ac.last.Store(&id)
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if ac.cs != nil && ac.agentID == id.AgentID {
		return ac.cs, nil
	}
	if old := ac.cs; old != nil {
		ac.cs = nil
		c.closeInBackground(old)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, &upstream.Error{Outcome: upstream.Retry, Err: errClosed}
	}
	t := &mcp.StreamableClientTransport{
		Endpoint:   c.endpoint,
		HTTPClient: ac.http,
		// No standalone GET stream: Delx sends nothing unasked, and a
		// long-lived GET would only count against the rate limit.
		DisableStandaloneSSE: true,
		// No SSE resumption inside a call: the outbox retries whole
		// deliveries under its own rate limit.
		MaxRetries: -1,
	}
	p := new(probe)
	cs, err := c.mcp.Connect(withProbe(ctx, p), t, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	defer p.finish()
	if err != nil {
		ue, _ := classify(ctx, err, p, nil)
		ue.Err = fmt.Errorf("connecting: %w", ue.Err)
		return nil, ue
	}
	ac.cs, ac.agentID = cs, id.AgentID
	return cs, nil
}

// drop forgets the agent's session cs (if it is still the current one) and
// closes it in the background; the next call reconnects.
func (c *Client) drop(agent string, cs *mcp.ClientSession) {
	c.mu.Lock()
	ac := c.agents[agent]
	c.mu.Unlock()
	if ac != nil {
		ac.mu.Lock()
		if ac.cs == cs {
			ac.cs = nil
		}
		ac.mu.Unlock()
	}
	c.closeInBackground(cs)
}

// closeInBackground closes cs (its DELETE) without holding up the caller;
// Close waits for it.
func (c *Client) closeInBackground(cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = cs.Close()
		return
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		_ = cs.Close() // best effort DELETE, bounded by the SDK (5s)
	}()
}

// call runs one tool call for agent under the client's timeout and maps
// every failure to an *upstream.Error. sent, when set, is the capsule sent,
// which no error message may repeat.
func (c *Client) call(ctx context.Context, agent string, id Identity, tool string, args map[string]any, key string, sent *capsule.Capsule) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(withIdentity(ctx, id), c.timeout)
	defer cancel()
	cs, err := c.session(ctx, agent, id)
	if err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	cctx := ctx
	if key != "" {
		params.Meta = mcp.Meta{MetaIdempotencyKey: key}
		cctx = withIdempotencyKey(cctx, key)
	}
	p := new(probe)
	res, err := cs.CallTool(withProbe(cctx, p), params)
	defer p.finish()
	if err != nil {
		ue, broken := classify(ctx, err, p, sent)
		if broken {
			c.drop(agent, cs)
		}
		ue.Err = fmt.Errorf("%s: %w", tool, ue.Err)
		return nil, withoutInvite(ue, id.InviteToken)
	}
	if res.IsError {
		return nil, withoutInvite(toolError(tool, res, sent), id.InviteToken)
	}
	return res, nil
}

// withoutInvite replaces the fleet's invite token wherever a server's text
// in ue repeats it: errors reach logs, status and resume.
func withoutInvite(ue *upstream.Error, invite string) *upstream.Error {
	if invite == "" {
		return ue
	}
	if ue.Err != nil && strings.Contains(ue.Err.Error(), invite) {
		ue.Err = errors.New(strings.ReplaceAll(ue.Err.Error(), invite, "[invite token]"))
	}
	ue.Code = strings.ReplaceAll(ue.Code, invite, "[invite token]")
	return ue
}
