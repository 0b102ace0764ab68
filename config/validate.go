package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/lazyregexp"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// checker turns the raw file into a Config: it applies the defaults and
// records every problem it meets, at the position of its key, instead of
// stopping at the first.
type checker struct {
	file string
	ix   *keyIndex
	env  environ
	errs Errors
}

// fail records a problem with the key at path.
func (c *checker) fail(path, msg string) {
	line, col := c.ix.locate(path)
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Column: col, Key: path, Msg: msg})
}

// failGot records a problem and the value that caused it, unless the key
// could hold a secret.
func (c *checker) failGot(path, msg string, v any) {
	if !secretKey(path) {
		msg += got(v)
	}
	c.fail(path, msg)
}

// secretKey reports whether a key's value must never be repeated. No key is
// meant to hold a secret, but a url can carry credentials, and a user who
// misreads token_env or token_file may paste the token itself there.
func secretKey(path string) bool {
	switch lastPart(path) {
	case "url", "registration_url", "token_env", "token_file":
		return true
	}
	return false
}

// build is the Config the raw file describes, each value defaulted and
// checked. Upstreams come before agents, which must name them.
func (c *checker) build(raw *rawConfig) *Config {
	cfg := &Config{
		Daemon:      c.daemon(raw.Daemon),
		Upstreams:   c.upstreams(raw.Upstreams),
		Guard:       c.guard(raw.Guard),
		Outbox:      c.outbox(raw.Outbox),
		Watch:       c.watch(raw.Watch),
		Policy:      c.policy(raw.Policy),
		Transcripts: c.transcripts(raw.Transcripts),
		Snapshots:   c.snapshots(raw.Snapshots),
		Places:      c.places(raw.Places),
	}
	cfg.Agents = c.agents(raw.Agents, cfg.Upstreams)
	return cfg
}

// orDefault is s, or def when s is empty (not set).
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (c *checker) daemon(r rawDaemon) Daemon {
	defState, defSocket := defaultPaths(c.env.lookup, c.env.euid, c.env.home())
	d := Daemon{
		SocketMode: c.socketMode("daemon.socket_mode", orDefault(r.SocketMode, defaultSocketMode)),
		Listen:     r.Listen,
		LogLevel:   c.oneOf("daemon.log_level", orDefault(r.LogLevel, defaultLogLevel), "debug", "info", "warn", "error"),
		LogFormat:  c.oneOf("daemon.log_format", orDefault(r.LogFormat, defaultLogFormat), "text", "json"),
	}
	d.ShutdownTimeout = c.timeout("daemon.shutdown_timeout", r.ShutdownTimeout, defaultShutdownTimeout)
	d.MCPSessionIdle = c.timeoutWithin("daemon.mcp_session_idle", r.MCPSessionIdle, DefaultMCPSessionIdle, time.Second, 24*time.Hour, "must be from 1s to 24h")
	d.ReadTimeout = c.timeoutWithin("daemon.read_timeout", r.ReadTimeout, DefaultReadTimeout, time.Second, time.Hour, "must be from 1s to 1h")
	d.IdleTimeout = c.timeoutWithin("daemon.idle_timeout", r.IdleTimeout, DefaultIdleTimeout, time.Second, time.Hour, "must be from 1s to 1h")
	d.WriteTimeout = c.timeoutWithin("daemon.write_timeout", r.WriteTimeout, DefaultWriteTimeout, time.Second, time.Hour, "must be from 1s to 1h")
	d.TimerSlack = c.timeoutWithin("daemon.timer_slack", r.TimerSlack, DefaultTimerSlack, time.Microsecond, maxTimerSlack, "must be from 1us to 10ms")
	d.MCPMaxSessions = DefaultMCPMaxSessions
	if n := r.MCPMaxSessions; n != nil {
		if *n < 1 || *n > 100_000 {
			c.failGot("daemon.mcp_max_sessions", "must be from 1 to 100000", *n)
		} else {
			d.MCPMaxSessions = int(*n)
		}
	}

	stateOK := true
	if r.StateDir == "" {
		d.StateDir = defState
		if !filepath.IsAbs(defState) {
			stateOK = false
			c.fail("daemon.state_dir", "has no default: neither $XDG_STATE_HOME nor $HOME is an absolute path; set state_dir")
		}
	} else {
		d.StateDir, stateOK = c.absPath("daemon.state_dir", r.StateDir)
	}

	switch {
	case r.Socket != "":
		var ok bool
		if d.Socket, ok = c.absPath("daemon.socket", r.Socket); ok {
			c.socketLength("daemon.socket", d.Socket, false)
		}
	case c.env.euid == 0:
		d.Socket = defSocket // a system service's socket is in /run, wherever its state is
		c.socketLength("daemon.socket", d.Socket, true)
	default:
		// Beside the state_dir actually configured, not the default one.
		d.Socket = userSocket(c.env.lookup, d.StateDir)
		if stateOK { // else the state_dir error already says it all
			c.socketLength("daemon.socket", d.Socket, true)
		}
	}

	if d.Listen != "" {
		c.listen("daemon.listen", d.Listen)
	}
	return d
}

// absPath expands a leading "~/" to $HOME and requires the result to be
// absolute: the daemon's working directory is no place to resolve paths
// against, as a service manager picks it.
// caFile checks a network upstream's ca_file, strictly: an absolute path
// to a readable PEM file holding at least one certificate.
func (c *checker) caFile(p string, r rawUpstream, u *Upstream) {
	if r.CAFile == "" {
		return
	}
	key := joinKey(p, "ca_file")
	path, ok := c.absPath(key, r.CAFile)
	u.CAFile = path
	if !ok {
		return
	}
	if _, err := u.CAPool(); err != nil {
		c.fail(key, err.Error())
	}
}

func (c *checker) absPath(key, p string) (string, bool) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := c.env.home()
		if !filepath.IsAbs(home) {
			c.fail(key, "starts with ~ but $HOME is not set to an absolute path")
			return p, false
		}
		p = filepath.Join(home, p[1:])
	} else if strings.HasPrefix(p, "~") {
		c.failGot(key, "only ~/ (the daemon user's $HOME) is expanded, not ~user", p)
		return p, false
	}
	if !filepath.IsAbs(p) {
		c.failGot(key, "must be an absolute path (or start with ~/)", p)
		return p, false
	}
	return filepath.Clean(p), true
}

// socketLength checks that a Unix socket path fits in sun_path, which the
// kernel would otherwise refuse (or, on some systems, silently truncate).
func (c *checker) socketLength(key, p string, isDefault bool) {
	limit := safesocket.MaxPathLen()
	if len(p) <= limit {
		return
	}
	msg := fmt.Sprintf("is %d bytes long; a Unix socket path on %s is at most %d", len(p), runtime.GOOS, limit)
	if isDefault {
		msg = fmt.Sprintf("the default %q is %d bytes long; a Unix socket path on %s is at most %d: set a shorter socket", p, len(p), runtime.GOOS, limit)
		c.fail(key, msg)
		return
	}
	c.failGot(key, msg, p)
}

// socketMode reads an octal permission such as "0600" and returns it in
// canonical four-digit form.
func (c *checker) socketMode(key, s string) string {
	m, err := strconv.ParseUint(s, 8, 32)
	switch {
	case err != nil || m > 0o777:
		c.failGot(key, `must be an octal mode from "0600" to "0777"`, s)
	case m&0o600 != 0o600:
		// Without read and write the daemon's own user could not use it.
		c.failGot(key, "must let the owner read and write (0600)", s)
	default:
		return fmt.Sprintf("%04o", m)
	}
	return s
}

// listen requires a loopback host:port: the listener serves the same API as
// the socket, which is not meant to be reachable from the network.
func (c *checker) listen(key, s string) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		c.failGot(key, `must be host:port, such as "127.0.0.1:7457"`, s)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		c.failGot(key, "must end with a port number from 1 to 65535", s)
		return
	}
	if !isLoopback(host) {
		c.failGot(key, "must be a loopback address; the API is not meant for the network", s)
	}
}

// isLoopback reports whether host is "localhost" or a loopback IP
// (127.0.0.0/8, ::1).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && a.IsLoopback()
}

func (c *checker) oneOf(key, s string, allowed ...string) string {
	if !slices.Contains(allowed, s) {
		c.failGot(key, "must be one of "+strings.Join(allowed, ", "), s)
	}
	return s
}

// timeout reads an optional duration that must be above zero.
func (c *checker) timeout(key string, s *string, def time.Duration) Duration {
	if s == nil {
		return Duration{def}
	}
	d, err := parseDuration(*s)
	switch {
	case err != nil:
		c.fail(key, err.Error()) // the message shows the value
	case d == 0:
		c.failGot(key, "must be more than zero", *s)
	}
	return Duration{d}
}

// timeoutWithin is timeout for a key whose value must lie from least to
// most; rule says so in the error.
func (c *checker) timeoutWithin(key string, s *string, def, least, most time.Duration, rule string) Duration {
	d := c.timeout(key, s, def)
	if s != nil && d.Duration > 0 && (d.Duration < least || d.Duration > most) {
		c.failGot(key, rule, *s)
	}
	return d
}

// namePattern is what an agent or upstream name must look like: it names a
// directory, so no separators, dots or upper case (which would collide on
// case-insensitive file systems).
var namePattern = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,62}$`)

const nameRule = "must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit"

func (c *checker) agents(raw []rawAgent, ups map[string]Upstream) []Agent {
	if raw == nil {
		wd, err := c.env.getwd()
		if err != nil {
			c.fail("agent", "no [[agent]] is given, and the current directory, which the default agent would watch, is unknown: "+err.Error())
			return nil
		}
		return []Agent{{Name: DefaultAgent, Workdir: filepath.Clean(wd), Upstreams: []string{LocalUpstream}, Transcript: TranscriptAuto}}
	}
	if len(raw) == 0 {
		c.fail("agent", "must hold at least one agent; leave it out for the default agent")
		return []Agent{}
	}
	declared := append(slices.Collect(maps.Keys(ups)), LocalUpstream)
	slices.Sort(declared)
	declared = slices.Compact(declared)

	agents := make([]Agent, len(raw))
	first := map[string]string{} // name → key of the agent that has it
	for i, r := range raw {
		p := indexKey("agent", i)
		a := Agent{Name: r.Name, Workdir: r.Workdir, Upstreams: r.Upstreams}
		nameKey := joinKey(p, "name")
		switch {
		case r.Name == "":
			c.fail(nameKey, "is required")
		case !namePattern.MatchString(r.Name):
			c.failGot(nameKey, nameRule+" (it names a directory)", r.Name)
		case first[r.Name] != "":
			line, col := c.ix.locate(first[r.Name])
			c.failGot(nameKey, fmt.Sprintf("%s has this name already (at %d:%d)", first[r.Name], line, col), r.Name)
		default:
			first[r.Name] = nameKey
		}
		if r.Workdir != "" {
			a.Workdir, _ = c.absPath(joinKey(p, "workdir"), r.Workdir)
		}
		if r.Upstreams == nil {
			a.Upstreams = []string{LocalUpstream}
		} else {
			c.agentUpstreams(joinKey(p, "upstreams"), r.Upstreams, declared)
		}
		a.Transcript = c.oneOf(joinKey(p, "transcript"), orDefault(r.Transcript, TranscriptAuto), TranscriptAuto, TranscriptClaudeCode, TranscriptCodex, TranscriptOff)
		a.Identity = c.identities(joinKey(p, "identity"), r.Identity, a.Upstreams, ups)
		a.DelxFleet = c.delxFleets(joinKey(p, "delx_fleet"), r.DelxFleet, a.Upstreams, ups)
		if len(r.Users) > 0 { // an empty list is the same as none
			a.Users, a.UIDs = r.Users, c.accounts(joinKey(p, "users"), r.Users, lookupUID)
		}
		if len(r.Groups) > 0 {
			a.Groups, a.GIDs = r.Groups, c.accounts(joinKey(p, "groups"), r.Groups, lookupGID)
		}
		agents[i] = a
	}
	return agents
}

// agentUpstreams checks that an agent names upstreams that exist, each once.
func (c *checker) agentUpstreams(key string, names, declared []string) {
	if len(names) == 0 {
		c.fail(key, `must name at least one upstream; leave it out for ["local"]`)
	}
	seen := make(map[string]bool, len(names))
	for j, n := range names {
		k := indexKey(key, j)
		switch {
		case !slices.Contains(declared, n):
			c.fail(k, fmt.Sprintf("unknown upstream %q; declared: %s", n, strings.Join(declared, ", ")))
		case seen[n]:
			c.failGot(k, "names the same upstream twice", n)
		}
		seen[n] = true
	}
}

// identities checks an agent's [agent.identity.UPSTREAM] tables: each names
// a delx upstream the agent ships to and holds a whole identity.
func (c *checker) identities(key string, raw map[string]rawIdentity, agentUps []string, ups map[string]Upstream) map[string]DelxIdentity {
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]DelxIdentity, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p := joinKey(key, name)
		r := raw[name]
		u, declared := ups[name]
		switch {
		case !slices.Contains(agentUps, name):
			c.fail(p, fmt.Sprintf("the agent does not ship to upstream %q; add it to the agent's upstreams, or remove this table", name))
		case !declared || u.Kind != KindDelx:
			c.fail(p, fmt.Sprintf("upstream %q is not of kind \"delx\"; only delx upstreams take an agent identity", name))
		}
		id := DelxIdentity(r)
		c.identityValue(joinKey(p, "agent_id"), p, r.AgentID, "agent_id")
		c.identityValue(joinKey(p, "session_id"), p, r.SessionID, "session_id")
		envKey, fileKey := joinKey(p, "token_env"), joinKey(p, "token_file")
		switch {
		case r.TokenEnv == "" && r.TokenFile == "":
			c.fail(p, "needs token_env (an environment variable) or token_file (a file) holding the token Delx issued for agent_id")
		case r.TokenEnv != "" && r.TokenFile != "":
			c.fail(fileKey, "set token_env or token_file, not both")
		}
		if r.TokenEnv != "" && !envNamePattern.MatchString(r.TokenEnv) {
			c.fail(envKey, "must be the name of an environment variable (letters, digits and _), not the token itself")
		}
		if r.TokenFile != "" {
			id.TokenFile, _ = c.absPath(fileKey, r.TokenFile)
		}
		out[name] = id
	}
	return out
}

// maxIdentityValue bounds an agent_id or session_id: Delx's are short, and
// they travel in headers and tool arguments.
const maxIdentityValue = 200

// identityValue checks a required agent_id or session_id: what Delx issued,
// sent as a header, so visible ASCII without spaces.
func (c *checker) identityValue(key, table, v, name string) {
	switch {
	case v == "":
		c.fail(table, name+" is required: the "+name+" Delx issued for this agent")
	case len(v) > maxIdentityValue:
		c.fail(key, fmt.Sprintf("is longer than %d characters", maxIdentityValue))
	case !headerSafe(v):
		c.failGot(key, "must be visible ASCII characters without spaces, as Delx issued it", v)
	}
}

// headerSafe reports whether s is visible ASCII without spaces.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (c *checker) upstreams(raw map[string]rawUpstream) map[string]Upstream {
	ups := make(map[string]Upstream, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p := joinKey("upstream", name)
		if !namePattern.MatchString(name) {
			c.failGot(p, "the name "+nameRule+" (it names a directory)", name)
		}
		ups[name] = c.upstream(p, name, raw[name])
	}
	return ups
}

func isKind(s string) bool {
	return s == KindQDay || s == KindDelx || s == KindLocal || s == KindNATS
}

func (c *checker) upstream(p, name string, r rawUpstream) Upstream {
	kindKey := joinKey(p, "kind")
	kind := r.Kind
	switch {
	case kind == "" && isKind(name):
		kind = name // [upstream.qday] is a qday upstream unless it says otherwise
	case kind == "":
		c.fail(kindKey, "is required: qday, delx, local or nats")
	case !isKind(kind):
		c.failGot(kindKey, "must be one of qday, delx, local, nats", kind)
	case name == LocalUpstream && kind != KindLocal:
		c.failGot(kindKey, `the upstream named "local" must be of kind "local"`, kind)
	}

	u := kindDefaults(kind)
	u.URL, u.TokenEnv, u.TokenFile, u.RegistrationURL = r.URL, r.TokenEnv, r.TokenFile, r.RegistrationURL
	if r.RegistrationURL != "" {
		if kind == KindDelx {
			c.remoteURL(joinKey(p, "registration_url"), kind, r.RegistrationURL)
		} else {
			c.fail(joinKey(p, "registration_url"), "only a delx upstream takes a registration_url")
		}
	}
	if kind != KindNATS {
		c.notNATS(p, r)
	}
	switch kind {
	case KindNATS:
		c.nats(p, r, &u)
	case KindQDay:
		c.remoteURL(joinKey(p, "url"), kind, r.URL)
		c.token(p, kind, &u)
		c.caFile(p, r, &u)
	case KindDelx:
		// Each agent has its own Delx identity ([agent.identity.NAME] or
		// `continuityd delx register`); a token here is the older shared
		// one, used only by agents that have neither.
		c.remoteURL(joinKey(p, "url"), kind, r.URL)
		if u.HasToken() {
			c.token(p, kind, &u)
		}
		c.caFile(p, r, &u)
	case KindLocal:
		if r.CAFile != "" {
			c.fail(joinKey(p, "ca_file"), "the local upstream takes no ca_file")
		}
		if r.URL != "" {
			c.fail(joinKey(p, "url"), "the local upstream takes no url")
		}
		if r.TokenEnv != "" {
			c.fail(joinKey(p, "token_env"), "the local upstream takes no token")
		}
		if r.TokenFile != "" {
			c.fail(joinKey(p, "token_file"), "the local upstream takes no token")
		}
	}

	if r.Rate != nil {
		u.Rate = *r.Rate
		if !(u.Rate > 0) || math.IsInf(u.Rate, 0) { // !(> 0) also refuses NaN
			c.failGot(joinKey(p, "rate"), "must be a number of requests per second above zero", u.Rate)
		}
	}
	if r.Burst != nil {
		b := *r.Burst
		switch {
		case b < 1:
			c.failGot(joinKey(p, "burst"), "must be at least 1", b)
		case int64(int(b)) != b:
			c.failGot(joinKey(p, "burst"), "is too large", b)
		default:
			u.Burst = int(b)
		}
	}
	u.Timeout = c.timeout(joinKey(p, "timeout"), r.Timeout, u.Timeout.Duration)
	return u
}

// remoteURL checks the base URL of a network upstream. The value is never
// repeated in a message: it may hold credentials.
func (c *checker) remoteURL(key, kind, s string) {
	if s == "" {
		c.fail(key, fmt.Sprintf("is required for kind %q", kind))
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		c.fail(key, "is not a valid URL")
	case u.User != nil:
		c.fail(key, "credentials in the url are not allowed; use token_env or token_file")
	case u.Scheme != "http" && u.Scheme != "https":
		c.fail(key, "must be an https:// (or loopback http://) URL")
	case u.Host == "" || u.Hostname() == "":
		c.fail(key, "must name a host")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		// The token travels in a header: in clear text only on this host.
		c.fail(key, "plain http:// is allowed only to a loopback address; use https://")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// A base URL needs neither, and a query is where tokens hide.
		c.fail(key, "must have no query (?…) or fragment (#…); a token belongs in token_env or token_file")
	}
}

// envNamePattern is a portable environment variable name.
var envNamePattern = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// token checks that a network upstream says where its token is, one way.
func (c *checker) token(p, kind string, u *Upstream) {
	envKey, fileKey := joinKey(p, "token_env"), joinKey(p, "token_file")
	switch {
	case u.TokenEnv == "" && u.TokenFile == "":
		c.fail(envKey, fmt.Sprintf("kind %q needs token_env (an environment variable) or token_file (a file) holding its token", kind))
	case u.TokenEnv != "" && u.TokenFile != "":
		c.fail(fileKey, "set token_env or token_file, not both")
	}
	if u.TokenEnv != "" && !envNamePattern.MatchString(u.TokenEnv) {
		c.fail(envKey, "must be the name of an environment variable (letters, digits and _), not the token itself")
	}
	if u.TokenFile != "" {
		u.TokenFile, _ = c.absPath(fileKey, u.TokenFile)
	}
}

func (c *checker) guard(r rawGuard) Guard {
	if r.AllowedLinkDomains == nil {
		return Guard{AllowedLinkDomains: defaultLinkDomains()}
	}
	seen := make(map[string]bool, len(r.AllowedLinkDomains))
	for i, d := range r.AllowedLinkDomains {
		k := indexKey("guard.allowed_link_domains", i)
		switch {
		case !isDomain(d):
			c.failGot(k, `must be a bare lowercase domain name such as "example.com" (no scheme, port, path or wildcard)`, d)
		case seen[d]:
			c.failGot(k, "is listed twice", d)
		}
		seen[d] = true
	}
	return Guard(r)
}

// isDomain reports whether s is a lowercase DNS name with at least two
// labels, the last not numeric (so not an IP address).
func isDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	_, err := strconv.Atoi(labels[len(labels)-1])
	return err != nil
}

// Outbox defaults.
const (
	defaultMaxPending        = 10000
	defaultMinBackoff        = time.Second
	defaultMaxBackoff        = 5 * time.Minute
	defaultMaxRetryAfter     = 10 * time.Minute
	defaultUnauthorizedRetry = 5 * time.Minute
	defaultResumeTimeout     = 1500 * time.Millisecond
)

func (c *checker) outbox(r rawOutbox) Outbox {
	o := Outbox{
		MaxPending:        defaultMaxPending,
		MinBackoff:        c.timeout("outbox.min_backoff", r.MinBackoff, defaultMinBackoff),
		MaxBackoff:        c.timeout("outbox.max_backoff", r.MaxBackoff, defaultMaxBackoff),
		MaxRetryAfter:     c.timeout("outbox.max_retry_after", r.MaxRetryAfter, defaultMaxRetryAfter),
		UnauthorizedRetry: c.timeout("outbox.unauthorized_retry", r.UnauthorizedRetry, defaultUnauthorizedRetry),
		ResumeTimeout:     c.timeout("outbox.resume_timeout", r.ResumeTimeout, defaultResumeTimeout),
	}
	if r.MaxPending != nil {
		if *r.MaxPending < 1 || *r.MaxPending > 10_000_000 {
			c.failGot("outbox.max_pending", "must be from 1 to 10000000", *r.MaxPending)
		} else {
			o.MaxPending = int(*r.MaxPending)
		}
	}
	if o.MinBackoff.Duration > o.MaxBackoff.Duration {
		c.failGot("outbox.min_backoff", "must not be above outbox.max_backoff", o.MinBackoff.String())
	}
	return o
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func (c *checker) watch(r rawWatch) Watch {
	w := Watch{
		Enabled:     boolOr(r.Enabled, true),
		Ignore:      r.Ignore,
		IgnoreDirs:  r.IgnoreDirs,
		Quiet:       c.timeout("watch.quiet", r.Quiet, 2*time.Second),
		Settle:      c.timeoutWithin("watch.settle", r.Settle, 300*time.Millisecond, 50*time.Millisecond, 5*time.Second, "must be from 50ms to 5s"),
		ShellMax:    c.timeout("watch.shell_max", r.ShellMax, 10*time.Minute),
		HandoffFile: orDefault(r.HandoffFile, "HANDOFF.md"),
		CapsuleFile: orDefault(r.CapsuleFile, filepath.Join(".continuity", "capsule.json")),
	}
	for _, f := range []struct{ key, v string }{{"watch.handoff_file", w.HandoffFile}, {"watch.capsule_file", w.CapsuleFile}} {
		if filepath.IsAbs(f.v) || strings.HasPrefix(filepath.Clean(f.v), "..") {
			c.failGot(f.key, "must be a path inside the workdir", f.v)
		}
	}
	if w.IgnoreDirs == nil {
		w.IgnoreDirs = DefaultIgnoreDirs()
	}
	if w.Ignore == nil {
		w.Ignore = []string{}
	}
	for i, d := range r.IgnoreDirs {
		if d == "" || strings.ContainsAny(d, `/\`) {
			c.failGot(indexKey("watch.ignore_dirs", i), "must be a directory name, not a path", d)
		}
	}
	return w
}

func (c *checker) policy(r rawPolicy) Policy {
	p := Policy{
		Enabled:          boolOr(r.Enabled, true),
		Quiet:            c.timeout("policy.quiet", r.Quiet, 20*time.Second),
		MaxDelay:         c.timeout("policy.max_delay", r.MaxDelay, 5*time.Minute),
		MinInterval:      c.timeout("policy.min_interval", r.MinInterval, time.Minute),
		Thresholds:       r.Thresholds,
		IdleAfter:        c.timeout("policy.idle_after", r.IdleAfter, 10*time.Minute),
		Refresh:          c.timeout("policy.refresh", r.Refresh, 45*time.Minute),
		PublicStatus:     c.oneOf("policy.public_status", orDefault(r.PublicStatus, "auto"), "auto", "on", "off"),
		SealOnCompaction: boolOr(r.SealOnCompaction, true),
		SealOnSessionEnd: boolOr(r.SealOnSessionEnd, true),
	}
	if p.Thresholds == nil {
		p.Thresholds = []float64{0.5, 0.7, 0.85}
	}
	for i, th := range p.Thresholds {
		if !(th > 0 && th < 1) {
			c.failGot(indexKey("policy.thresholds", i), "must be a fraction between 0 and 1", th)
		}
		if i > 0 && th <= p.Thresholds[i-1] {
			c.failGot(indexKey("policy.thresholds", i), "must be above the one before it", th)
		}
	}
	if p.Refresh.Duration >= time.Hour {
		c.failGot("policy.refresh", "must be under an hour, or the Q-Day office stops listing the agent between refreshes", p.Refresh.String())
	}
	return p
}

func (c *checker) transcripts(r rawTranscripts) Transcripts {
	t := Transcripts{Enabled: boolOr(r.Enabled, true),
		Rescan: c.timeout("transcripts.rescan", r.Rescan, DefaultTranscriptRescan)}
	home := c.env.home()
	defClaude, defCodex := "", ""
	if filepath.IsAbs(home) {
		defClaude, defCodex = filepath.Join(home, ".claude"), filepath.Join(home, ".codex")
	}
	t.ClaudeHome, t.CodexHome = defClaude, defCodex
	if r.ClaudeHome != "" {
		t.ClaudeHome, _ = c.absPath("transcripts.claude_home", r.ClaudeHome)
	}
	if r.CodexHome != "" {
		t.CodexHome, _ = c.absPath("transcripts.codex_home", r.CodexHome)
	}
	return t
}

// DefaultTranscriptRescan is how often, by default, the transcript
// follower looks for a new session without a file event.
const DefaultTranscriptRescan = 30 * time.Second

// Snapshot defaults: they fit a laptop (daemon/snapshot takes them as its own).
const (
	DefaultSnapshotMaxFileSize = 8 << 20
	DefaultSnapshotKeep        = 200
	DefaultSnapshotKeepBytes   = 512 << 20
)

func (c *checker) snapshots(r rawSnapshots) Snapshots {
	s := Snapshots{Enabled: boolOr(r.Enabled, true), MaxFileSize: DefaultSnapshotMaxFileSize,
		Keep: DefaultSnapshotKeep, KeepBytes: DefaultSnapshotKeepBytes, OnExplicitCheckpoint: boolOr(r.OnExplicitCheckpoint, false)}
	if n := r.MaxFileSize; n != nil {
		if *n < 0 {
			c.failGot("snapshots.max_file_size", "must be a size in bytes, 0 for no limit", *n)
		} else {
			s.MaxFileSize = *n
		}
	}
	if n := r.Keep; n != nil {
		if *n < 1 || *n > 100_000 {
			c.failGot("snapshots.keep", "must be from 1 to 100000", *n)
		} else {
			s.Keep = int(*n)
		}
	}
	if n := r.KeepBytes; n != nil {
		if *n < 1<<20 {
			c.failGot("snapshots.keep_bytes", "must be at least 1048576 (1 MiB)", *n)
		} else {
			s.KeepBytes = *n
		}
	}
	s.Journal = boolOr(r.Journal, true)
	s.JournalKeepAll = c.timeoutWithin("snapshots.journal_keep_all", r.JournalKeepAll, 24*time.Hour, time.Minute, 365*24*time.Hour, "must be from 1m to 8760h")
	s.JournalKeepHourly = c.timeoutWithin("snapshots.journal_keep_hourly", r.JournalKeepHourly, 7*24*time.Hour, time.Minute, 10*365*24*time.Hour, "must be from 1m to 87600h")
	s.JournalShare = 0.5
	if f := r.JournalShare; f != nil {
		if *f < 0.05 || *f > 0.95 {
			c.failGot("snapshots.journal_share", "must be from 0.05 to 0.95", *f)
		} else {
			s.JournalShare = *f
		}
	}
	for i, p := range r.FleetWithhold {
		if err := CheckFleetWithhold(p); err != nil {
			c.failGot(indexKey("snapshots.fleet_withhold", i), "must be a glob pattern relative to the workdir: "+err.Error(), p)
		} else {
			s.FleetWithhold = append(s.FleetWithhold, p)
		}
	}
	return s
}

// CheckFleetWithhold refuses a [snapshots] fleet_withhold pattern that
// could never match what it means to: empty, absolute, climbing out with
// "..", or of bad glob syntax.
func CheckFleetWithhold(p string) error {
	switch {
	case p == "":
		return errors.New("it is empty")
	case strings.ContainsAny(p, "\x00\r\n"):
		return errors.New("it holds a NUL or a line break")
	case strings.HasPrefix(p, "/"):
		return errors.New("it is absolute")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return errors.New("it holds a \"..\" segment")
	}
	if _, err := path.Match(p, ""); err != nil {
		return errors.New("its glob syntax is bad")
	}
	return nil
}
