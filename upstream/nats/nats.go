// Package nats is the `nats` upstream: a fleet of continuityd daemons
// sharing agents through NATS JetStream, so an agent can resume on any
// machine that reaches the fleet.
//
// The Client ships the writes (upstream.Upstream) and answers what
// daemon/agent asks of a fleet (its Fleet interface: restore and replay,
// the state published, other writers, the fleet's agents, work
// snapshots) in capsule's fleet types. Its settings' rules are
// internal/natsrules', which config applies to the file too. Only the
// daemon's wiring names this package.
//
// # What goes where
//
// With the defaults (SubjectPrefix "continuityd", Stream "CONTINUITYD",
// Bucket "continuityd"):
//
//   - every accepted write of agent A (capsule.Write as JSON) is published
//     to the stream CONTINUITYD on the subject
//     continuityd.writes.A.KIND (KIND: checkpoint, capsule, capsule_seal,
//     session_end) with Nats-Msg-Id set to the write's Idempotency-Key, so
//     the server drops a retry of a write it already stored (within the
//     stream's duplicate window, 1 hour for a stream this package makes).
//     Headers Continuityd-Seq and Continuityd-Machine name the write's log
//     position and the daemon that sent it;
//   - directions for A from operators are published to
//     continuityd.directions.A (the same stream, e.g.
//     `nats pub continuityd.directions.builder "rebase first" -H Nats-Msg-Id:d-1`)
//     and read through the durable pull consumer continuityd-dir-A;
//   - A's latest state document (the daemon's resume document, wrapped in a
//     small envelope naming the machine, the log seq and the time) is the
//     value of key A in the key-value bucket "continuityd" (the stream
//     KV_continuityd), written with optimistic concurrency on the key's
//     revision. A daemon that finds another one writing the same agent
//     keeps its own state under A.conflict.MACHINE instead of overwriting.
//
// # Streams and buckets
//
// The stream and the bucket are created when missing, with Options.Replicas
// replicas (1 by default; 3 for a three-node cluster). One that exists is
// used as it is: never updated, never deleted. A stream that exists without
// a subject this package needs is an error naming the stream and the
// subject, at every delivery, until an operator adds it or points Stream
// elsewhere.
//
// # Errors
//
// Deliver classifies every failure for the outbox (upstream.Error):
//
//   - connection lost, reconnecting, timeouts, no responders (JetStream
//     electing a leader), stream missing or not matching: Retry;
//   - the stream or the account full (maximum messages or bytes with the
//     discard-new policy, insufficient storage or resources): RateLimited
//     with RetryAfter StoreFullRetry. The write stays in order at the head
//     of the outbox and the upstream shows as paused with the server's
//     words, rather than sending each following write to the dead letter
//     and leaving a hole in the fleet's history; raising the limits (or
//     purging) lets it through;
//   - a message over the server's size limit: Rejected (dead letter): it
//     can never fit;
//   - authorization violations and publish permission violations: for the
//     write's subject: Unauthorized (retried slowly, and at once on reload
//     after the credentials are fixed).
//
// The connection reconnects for ever with backoff. Nothing is buffered
// while disconnected (ReconnectBufSize -1): a publish during an outage
// fails at once rather than being sent later behind the outbox's back, so
// every message the server sees is one call the rate limiter allowed.
package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/lazyregexp"
	"github.com/continuityd/continuityd/internal/natsrules"
	"github.com/continuityd/continuityd/upstream"
)

// Kind is this upstream's kind in the config.
const Kind = "nats"

// Defaults.
const (
	DefaultSubjectPrefix = natsrules.DefaultSubjectPrefix
	DefaultStream        = natsrules.DefaultStream
	DefaultBucket        = natsrules.DefaultBucket
	// DefaultTimeout bounds one publish or request.
	DefaultTimeout = natsrules.DefaultTimeout
	// DuplicateWindow is the de-duplication window of a stream this
	// package creates: a write retried within it after a crash or a lost
	// acknowledgement is stored once.
	DuplicateWindow = time.Hour
	// BucketHistory is how many revisions of each key a bucket this
	// package creates keeps (for operators looking back).
	BucketHistory = 10
	// StoreFullRetry is the RetryAfter given when the stream or account is
	// full.
	StoreFullRetry = 30 * time.Second
	// DefaultConflictWindow is how long after another writer's last sign
	// of life a conflict is still reported.
	DefaultConflictWindow = natsrules.DefaultConflictWindow
	// MinWaitSeconds and MaxWaitSeconds bound Wait's maxSeconds.
	MinWaitSeconds = 1
	MaxWaitSeconds = 90
)

// Header names set on every published write.
const (
	HeaderSeq     = "Continuityd-Seq"
	HeaderMachine = "Continuityd-Machine"
)

// Options configures a Client.
type Options struct {
	// Name is the [upstream.NAME] this client was configured as.
	Name string
	// URLs are the servers, nats://host:port (tls://host:port for TLS; a
	// nats:// URL also upgrades when the server asks for TLS). They carry
	// no credentials.
	URLs []string
	// CredsFile is a NATS credentials file (JWT and NKey seed).
	CredsFile string
	// NKeyFile is a file holding an NKey seed (SU...).
	NKeyFile string
	// Token returns a token; called at every (re)connect, so a renewed
	// token applies at the next connection. At most one of CredsFile,
	// NKeyFile and Token.
	Token func() (string, error)
	// CAFile, when set, is the PEM file of CAs trusted for TLS.
	CAFile string
	// Stream, Bucket and SubjectPrefix name where the writes, directions
	// and states go (defaults above).
	Stream        string
	Bucket        string
	SubjectPrefix string
	// Replicas for a stream or bucket this package creates (default 1).
	Replicas int
	// Machine names this daemon in the fleet (the host name). Instance,
	// when set, tells apart two daemons on one machine (e.g. their state
	// directories): a writer is Machine plus Instance.
	Machine  string
	Instance string
	// Timeout bounds one publish or request (default 10s).
	Timeout time.Duration
	// ConflictWindow: see DefaultConflictWindow.
	ConflictWindow time.Duration
	// OnConflict, when set, is called (from a goroutine of the client's)
	// when another writer of an agent is first seen, so the daemon can log,
	// count and raise an event at once. It must not block.
	OnConflict func(capsule.FleetConflictError)
	// OnHandover, when set, is called (from a goroutine of the client's,
	// or a caller's) when the daemon learns an agent was taken from it
	// (`continuityd fleet take` on another machine). It must not block.
	OnHandover func(capsule.FleetHandover)
	// Logger gets connection events and conflicts (default slog.Default()).
	Logger *slog.Logger

	// connectOptions are appended last (tests).
	connectOptions []natsgo.Option
	// observed, when set, is told each key revision the watcher has
	// handled (tests: a point where "nothing was reported" can be looked at).
	observed func(agent string, revision uint64)
	// beforeTake, when set, is called by Take between reading the agent's
	// key and writing it (tests: two takers made to read the same revision).
	beforeTake func(agent string, revision uint64)
}

// Client is the NATS JetStream upstream. It is safe for concurrent use.
type Client struct {
	o        Options
	log      *slog.Logger
	nc       *natsgo.Conn
	js       jetstream.JetStream
	subjects subjects
	closed   chan struct{} // closed by the connection's ClosedHandler

	ensureMu sync.Mutex
	ready    atomic.Bool
	kv       jetstream.KeyValue
	obj      jetstream.ObjectStore // the snapshot bucket (objects.go), once found

	permErr atomic.Pointer[permissionError]

	mu        sync.Mutex
	consumers map[string]jetstream.Consumer // directions consumer per agent
	seen      map[string]*seenSet           // direction ids relayed per agent
	recent    map[string][]direction        // last relayed directions per agent
	agents    map[string]*agentState        // writers and conflicts per agent

	// ctx is cancelled by Close; the conflict watchers run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

type permissionError struct {
	subject string
	at      time.Time
	text    string
}

var (
	_ upstream.Upstream = (*Client)(nil)
	_ upstream.Resumer  = (*Client)(nil)
	_ upstream.Waiter   = (*Client)(nil)
)

// namePattern is what an agent name must be to be one subject token and
// one key (the config's agent name rule).
var namePattern = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// New checks o and connects. The connection is made in the background
// when the servers are unreachable (the daemon starts offline, and
// deliveries retry until the fleet answers); a bad option is an error.
// The stream and bucket are looked up (and created) at first use.
func New(o Options) (*Client, error) {
	if strings.TrimSpace(o.Name) == "" {
		return nil, errors.New("nats: the upstream needs a name")
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("nats: upstream %s: "+format, append([]any{o.Name}, a...)...)
	}
	if len(o.URLs) == 0 {
		return nil, fail("url: no server given (e.g. nats://127.0.0.1:4222)")
	}
	// The rules are natsrules', which config applies to the file too.
	for i, raw := range o.URLs {
		if err := natsrules.CheckServerURL(raw); err != nil {
			return nil, fail("url: server %d %v", i+1, err)
		}
	}
	if err := natsrules.CheckOneAuth(o.CredsFile != "", o.NKeyFile != "", o.Token != nil); err != nil {
		return nil, fail("%v", err)
	}
	o.Stream = cmp.Or(o.Stream, DefaultStream)
	o.Bucket = cmp.Or(o.Bucket, DefaultBucket)
	o.SubjectPrefix = cmp.Or(o.SubjectPrefix, DefaultSubjectPrefix)
	o.Replicas = cmp.Or(o.Replicas, natsrules.DefaultReplicas)
	for _, c := range []struct {
		key, value string
		err        error
	}{
		{"stream", strconv.Quote(o.Stream), natsrules.CheckStream(o.Stream)},
		{"bucket", strconv.Quote(o.Bucket), natsrules.CheckBucket(o.Bucket)},
		{"subject_prefix", strconv.Quote(o.SubjectPrefix), natsrules.CheckSubjectPrefix(o.SubjectPrefix)},
		{"replicas", strconv.Itoa(o.Replicas), natsrules.CheckReplicas(int64(o.Replicas))},
	} {
		if c.err != nil {
			return nil, fail("%s %s: %v", c.key, c.value, c.err)
		}
	}
	if o.Timeout < 0 {
		return nil, fail("negative timeout %v", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ConflictWindow <= 0 {
		o.ConflictWindow = DefaultConflictWindow
	}
	if strings.TrimSpace(o.Machine) == "" {
		return nil, fail("no machine name (the host name) given")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{
		o:         o,
		log:       o.Logger.With("upstream", o.Name),
		subjects:  subjects{prefix: o.SubjectPrefix},
		closed:    make(chan struct{}),
		consumers: map[string]jetstream.Consumer{},
		seen:      map[string]*seenSet{},
		recent:    map[string][]direction{},
		agents:    map[string]*agentState{},
	}
	opts := []natsgo.Option{
		natsgo.Name("continuityd " + o.Name + " " + o.Machine),
		natsgo.RetryOnFailedConnect(true),
		natsgo.MaxReconnects(-1),
		// A refused credential is retried too (the library gives up after
		// two refusals in a row otherwise): a renewed token or creds file
		// then applies without a restart.
		natsgo.IgnoreAuthErrorAbort(),
		natsgo.CustomReconnectDelay(reconnectDelay),
		// Nothing is held back while disconnected: see the package doc.
		natsgo.ReconnectBufSize(-1),
		natsgo.Timeout(o.Timeout),
		natsgo.DrainTimeout(o.Timeout),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				c.log.Warn("fleet connection lost; reconnecting", "err", err)
			}
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			c.log.Info("fleet connection back", "server", nc.ConnectedUrlRedacted())
		}),
		natsgo.ConnectHandler(func(nc *natsgo.Conn) {
			c.log.Info("fleet connected", "server", nc.ConnectedUrlRedacted())
		}),
		natsgo.ClosedHandler(func(*natsgo.Conn) { close(c.closed) }),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			if errors.Is(err, natsgo.ErrPermissionViolation) {
				c.notePermission(err)
			}
			c.log.Warn("fleet server reported an error", "err", err)
		}),
	}
	switch {
	case o.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(o.CredsFile))
	case o.NKeyFile != "":
		opt, err := natsgo.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			// The library's error may quote the file; it never quotes the seed.
			return nil, fail("nkey_file %s: %v", o.NKeyFile, err)
		}
		opts = append(opts, opt)
	case o.Token != nil:
		opts = append(opts, natsgo.TokenHandler(func() string {
			tok, err := o.Token()
			if err != nil {
				c.log.Warn("reading the fleet token failed", "err", err)
				return ""
			}
			return strings.TrimSpace(tok)
		}))
	}
	if o.CAFile != "" {
		opts = append(opts, natsgo.RootCAs(o.CAFile))
	}
	opts = append(opts, o.connectOptions...)
	nc, err := natsgo.Connect(strings.Join(o.URLs, ","), opts...)
	if err != nil {
		return nil, fail("connecting: %v", err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout))
	if err != nil {
		nc.Close()
		return nil, fail("jetstream: %v", err)
	}
	c.nc, c.js = nc, js
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// reconnectDelay backs off exponentially from 250ms to 30s with jitter, so
// a fleet of daemons does not come back all at once.
func reconnectDelay(attempts int) time.Duration {
	d := min(250*time.Millisecond<<min(attempts, 7), 30*time.Second)
	return d/2 + rand.N(d/2+1)
}

// notePermission remembers the last publish permission violation, so a
// publish that then times out is classified Unauthorized.
func (c *Client) notePermission(err error) {
	text := err.Error()
	subj := ""
	if i := strings.Index(text, `Publish to "`); i >= 0 {
		rest := text[i+len(`Publish to "`):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			subj = rest[:j]
		}
	}
	c.permErr.Store(&permissionError{subject: subj, at: time.Now(), text: text})
}

// Name implements upstream.Upstream.
func (c *Client) Name() string { return c.o.Name }

// Kind implements upstream.Upstream.
func (c *Client) Kind() string { return Kind }

// Accepts implements upstream.Upstream: the fleet keeps every write.
func (c *Client) Accepts(capsule.WriteKind) bool { return true }

// Stream, Bucket and SubjectPrefix are the names in use.
func (c *Client) Stream() string        { return c.o.Stream }
func (c *Client) Bucket() string        { return c.o.Bucket }
func (c *Client) SubjectPrefix() string { return c.o.SubjectPrefix }

// WriteSubject is the subject agent's writes of kind k are published to.
func (c *Client) WriteSubject(agent string, k capsule.WriteKind) string {
	return c.subjects.write(agent, string(k))
}

// DirectionSubject is the subject operators publish agent's directions to.
func (c *Client) DirectionSubject(agent string) string { return c.subjects.direction(agent) }

// Health reports the connection's state.
func (c *Client) Health() capsule.FleetHealth {
	st := c.nc.Status()
	h := capsule.FleetHealth{Connected: st == natsgo.CONNECTED, State: strings.ToLower(st.String()),
		Server: c.nc.ConnectedUrlRedacted(), Reconnects: c.nc.Stats().Reconnects}
	if err := c.nc.LastError(); err != nil {
		h.LastError = err.Error()
	}
	return h
}

// Close stops the conflict watchers and drains the connection: publishes
// in flight get their acknowledgements, subscriptions are removed, then the
// connection closes (bounded by Timeout). Idempotent.
func (c *Client) Close() error {
	var err error
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
		if derr := c.nc.Drain(); derr != nil && !errors.Is(derr, natsgo.ErrConnectionClosed) {
			c.nc.Close()
		}
		t := time.NewTimer(c.o.Timeout + time.Second)
		defer t.Stop()
		select {
		case <-c.closed:
		case <-t.C:
			c.nc.Close()
			<-c.closed
			err = errors.New("nats: draining the connection timed out; closed it")
		}
	})
	return err
}

// Deliver implements upstream.Upstream: it publishes w (as JSON) to
// WriteSubject(agent, w.Kind) with Nats-Msg-Id = w.IdempotencyKey and
// waits for the stream's acknowledgement. A duplicate acknowledgement (the
// server had it already) is success.
func (c *Client) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	if !namePattern.MatchString(agent) {
		return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("agent name %q cannot be a subject token", agent)}
	}
	if !kindPattern.MatchString(string(w.Kind)) {
		return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("write kind %q cannot be a subject token", w.Kind)}
	}
	if w.IdempotencyKey == "" {
		return &upstream.Error{Outcome: upstream.Rejected, Err: errors.New("write without an Idempotency-Key")}
	}
	if err := c.ensure(ctx); err != nil {
		return err
	}
	if h := c.givenAway(ctx, agent); h != nil {
		// Held, not refused: the write stays in this daemon's outbox
		// (the taker writes the agent now; nothing here is dropped).
		return &upstream.Error{Outcome: upstream.RateLimited, Code: capsule.CodeAgentHandedOver, RetryAfter: StoreFullRetry,
			Err: &capsule.FleetHandedOverError{Handover: *h}}
	}
	body, err := encodeWrite(w)
	if err != nil {
		return &upstream.Error{Outcome: upstream.Rejected, Err: fmt.Errorf("encoding the write: %w", err)}
	}
	subj := c.subjects.write(agent, string(w.Kind))
	msg := &natsgo.Msg{Subject: subj, Data: body, Header: natsgo.Header{}}
	msg.Header.Set(natsgo.MsgIdHdr, w.IdempotencyKey)
	msg.Header.Set(HeaderSeq, fmt.Sprint(w.Seq))
	msg.Header.Set(HeaderMachine, c.o.Machine)
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	start := time.Now()
	// No retries inside the library (it retries "no responders" twice by
	// default): one Deliver is one message on the wire, one rate token.
	_, err = c.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(c.o.Stream), jetstream.WithRetryAttempts(0))
	if err != nil {
		return c.classify(err, subj, start)
	}
	return nil
}

// kindPattern: a write kind is one subject token.
var kindPattern = lazyregexp.New(`^[a-z0-9_]{1,40}$`)

// classify turns a publish or request error into an *upstream.Error.
func (c *Client) classify(err error, subj string, start time.Time) *upstream.Error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return &upstream.Error{Outcome: upstream.Rejected, Status: apiErr.Code, Code: "MESSAGE_TOO_LARGE", Err: err}
		case 10077, 10002, 10023, 10028, 10047: // store failed (max msgs/bytes), account, storage or memory limits
			return &upstream.Error{Outcome: upstream.RateLimited, Status: apiErr.Code, Code: "STREAM_FULL",
				RetryAfter: StoreFullRetry, Err: fmt.Errorf("stream %s cannot take more: %w", c.o.Stream, err)}
		case jetstream.JSErrCodeStreamNotFound, 10060: // stream gone, or the subject lands in another stream
			c.ready.Store(false)
			return &upstream.Error{Outcome: upstream.Retry, Status: apiErr.Code, Err: fmt.Errorf("stream %s: %w", c.o.Stream, err)}
		}
		return &upstream.Error{Outcome: upstream.Retry, Status: apiErr.Code, Err: err}
	}
	switch {
	case errors.Is(err, natsgo.ErrMaxPayload):
		return &upstream.Error{Outcome: upstream.Rejected, Code: "MESSAGE_TOO_LARGE", Err: err}
	case isAuthError(err):
		return &upstream.Error{Outcome: upstream.Unauthorized, Err: err}
	}
	if pe := c.permErr.Load(); pe != nil && !pe.at.Before(start.Add(-time.Second)) && (pe.subject == "" || pe.subject == subj) {
		return &upstream.Error{Outcome: upstream.Unauthorized, Code: "PERMISSION_DENIED",
			Err: fmt.Errorf("the fleet refused publishing to %s: %s", subj, pe.text)}
	}
	if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return &upstream.Error{Outcome: upstream.Retry, Err: fmt.Errorf("no JetStream answer for %s (stream %s unavailable or electing a leader): %w", subj, c.o.Stream, err)}
	}
	if last := c.nc.LastError(); last != nil && !c.nc.IsConnected() && isAuthError(last) {
		return &upstream.Error{Outcome: upstream.Unauthorized, Err: fmt.Errorf("%w (connecting: %v)", err, last)}
	}
	return &upstream.Error{Outcome: upstream.Retry, Err: err}
}

func isAuthError(err error) bool {
	return errors.Is(err, natsgo.ErrAuthorization) || errors.Is(err, natsgo.ErrAuthExpired) ||
		errors.Is(err, natsgo.ErrAuthRevoked) || errors.Is(err, natsgo.ErrAccountAuthExpired) ||
		errors.Is(err, natsgo.ErrPermissionViolation)
}

// ensure finds (or creates) the stream and the bucket once; after an
// error it tries again at the next call.
func (c *Client) ensure(ctx context.Context) error {
	if c.ready.Load() {
		return nil
	}
	c.ensureMu.Lock()
	defer c.ensureMu.Unlock()
	if c.ready.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	if err := c.ensureStream(ctx); err != nil {
		return err
	}
	if c.kv == nil {
		kv, err := c.ensureBucket(ctx)
		if err != nil {
			return err
		}
		c.kv = kv
	}
	c.ready.Store(true)
	return nil
}

func (c *Client) ensureStream(ctx context.Context) error {
	need := []string{c.subjects.writeAll(), c.subjects.directionAll()}
	s, err := c.js.Stream(ctx, c.o.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = c.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        c.o.Stream,
			Description: "continuityd: every accepted write of each agent, and operators' directions",
			Subjects:    need,
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    c.o.Replicas,
			Duplicates:  DuplicateWindow,
			Discard:     jetstream.DiscardNew,
		})
		if err == nil {
			c.log.Info("created the fleet stream", "stream", c.o.Stream, "subjects", need, "replicas", c.o.Replicas)
			return nil
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = c.js.Stream(ctx, c.o.Stream) // another daemon made it meanwhile
		}
	}
	if err != nil {
		return c.setupError("stream "+c.o.Stream, err)
	}
	have := s.CachedInfo().Config.Subjects
	for _, n := range need {
		if !coveredBy(n, have) {
			return &upstream.Error{Outcome: upstream.Retry, Code: "STREAM_SUBJECTS",
				Err: fmt.Errorf("stream %s exists without the subject %s (it has %s); add it (nats stream edit %s --subjects ...) or set another stream name",
					c.o.Stream, n, strings.Join(have, ", "), c.o.Stream)}
		}
	}
	return nil
}

func (c *Client) ensureBucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, c.o.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = c.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      c.o.Bucket,
			Description: "continuityd: each agent's latest state",
			History:     BucketHistory,
			Storage:     jetstream.FileStorage,
			Replicas:    c.o.Replicas,
		})
		if err == nil {
			c.log.Info("created the fleet bucket", "bucket", c.o.Bucket, "replicas", c.o.Replicas)
		} else if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = c.js.KeyValue(ctx, c.o.Bucket)
		}
	}
	if err != nil {
		return nil, c.setupError("bucket "+c.o.Bucket, err)
	}
	return kv, nil
}

func (c *Client) setupError(what string, err error) *upstream.Error {
	e := c.classify(err, "", time.Now())
	e.Err = fmt.Errorf("finding or creating the %s: %w", what, err)
	if e.Outcome == upstream.Rejected {
		e.Outcome = upstream.Retry
	}
	return e
}
