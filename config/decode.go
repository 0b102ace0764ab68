package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/continuityd/continuityd/internal/safefile"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

//go:embed default.toml
var defaultTOML []byte

// DefaultTOML is a fully commented example configuration: every key with its
// default and what it does. It is what `continuityd config default` prints,
// and what Default decodes.
func DefaultTOML() []byte {
	return bytes.Clone(defaultTOML) // callers may write to it; the embed must stay intact
}

// defaultName stands for the file name in errors about the embedded default.
const defaultName = "(default config)"

// Default is the configuration `run` uses without a file: DefaultTOML
// decoded, that is one agent "default" working in the current directory,
// delivering to the local upstream, with state and socket in DefaultPaths.
func Default() (*Config, error) {
	return Decode(defaultTOML, defaultName)
}

// maxConfigFile bounds the configuration file: a real one is a few
// kilobytes, and a larger one is the wrong file.
const maxConfigFile = 1 << 20

// Load reads and decodes the configuration file at path. It must be a
// regular file (a link to one is fine) of at most 1 MiB: a FIFO is never
// waited on, a device never read.
func Load(path string) (*Config, error) {
	if path == "" {
		return nil, errors.New("config: no file name given")
	}
	data, err := safefile.ReadFileFollow(path, maxConfigFile)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Decode(data, path)
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Decode reads a configuration strictly, fills in the defaults and checks
// every value. name (usually the file's path) prefixes each error. A
// configuration that is not accepted gives Errors, all of its problems in
// file order.
func Decode(data []byte, name string) (*Config, error) {
	return decode(data, name, hostEnv())
}

// The raw* types are what the file holds, before defaults. Numbers and
// durations are pointers so that a key left out (take the default) differs
// from a key set to zero (an error); durations are strings so that a bad one
// is reported with the key's position like any other bad value. An empty
// string means "not set", so a Config marshalled back to TOML, whose empty
// fields come out as "", reads the same.
type rawConfig struct {
	Daemon      rawDaemon              `toml:"daemon"`
	Agents      []rawAgent             `toml:"agent"` // nil: no agent given; empty: `agent = []`
	Upstreams   map[string]rawUpstream `toml:"upstream"`
	Guard       rawGuard               `toml:"guard"`
	Outbox      rawOutbox              `toml:"outbox"`
	Watch       rawWatch               `toml:"watch"`
	Policy      rawPolicy              `toml:"policy"`
	Transcripts rawTranscripts         `toml:"transcripts"`
	Snapshots   rawSnapshots           `toml:"snapshots"`
	Places      rawPlaces              `toml:"places"`
}

type rawPlaces struct {
	Adopt      *bool    `toml:"adopt"`
	Roots      []string `toml:"roots"` // nil: left out
	MaxWatched *int64   `toml:"max_watched"`
	IdleAfter  *string  `toml:"idle_after"`
}

type rawSnapshots struct {
	Enabled              *bool    `toml:"enabled"`
	MaxFileSize          *int64   `toml:"max_file_size"`
	Keep                 *int64   `toml:"keep"`
	KeepBytes            *int64   `toml:"keep_bytes"`
	OnExplicitCheckpoint *bool    `toml:"on_explicit_checkpoint"`
	FleetWithhold        []string `toml:"fleet_withhold"`
	Journal              *bool    `toml:"journal"`
	JournalKeepAll       *string  `toml:"journal_keep_all"`
	JournalKeepHourly    *string  `toml:"journal_keep_hourly"`
	JournalShare         *float64 `toml:"journal_share"`
}

type rawWatch struct {
	Enabled     *bool    `toml:"enabled"`
	Ignore      []string `toml:"ignore"`
	IgnoreDirs  []string `toml:"ignore_dirs"`
	Quiet       *string  `toml:"quiet"`
	Settle      *string  `toml:"settle"`
	ShellMax    *string  `toml:"shell_max"`
	HandoffFile string   `toml:"handoff_file"`
	CapsuleFile string   `toml:"capsule_file"`
}

type rawPolicy struct {
	Enabled          *bool     `toml:"enabled"`
	Quiet            *string   `toml:"quiet"`
	MaxDelay         *string   `toml:"max_delay"`
	MinInterval      *string   `toml:"min_interval"`
	Thresholds       []float64 `toml:"thresholds"`
	IdleAfter        *string   `toml:"idle_after"`
	Refresh          *string   `toml:"refresh"`
	PublicStatus     string    `toml:"public_status"`
	SealOnCompaction *bool     `toml:"seal_on_compaction"`
	SealOnSessionEnd *bool     `toml:"seal_on_session_end"`
}

type rawTranscripts struct {
	Enabled    *bool   `toml:"enabled"`
	ClaudeHome string  `toml:"claude_home"`
	CodexHome  string  `toml:"codex_home"`
	Rescan     *string `toml:"rescan"`
}

type rawOutbox struct {
	MaxPending        *int64  `toml:"max_pending"`
	MinBackoff        *string `toml:"min_backoff"`
	MaxBackoff        *string `toml:"max_backoff"`
	MaxRetryAfter     *string `toml:"max_retry_after"`
	UnauthorizedRetry *string `toml:"unauthorized_retry"`
	ResumeTimeout     *string `toml:"resume_timeout"`
}

type rawDaemon struct {
	StateDir        string  `toml:"state_dir"`
	Socket          string  `toml:"socket"`
	SocketMode      string  `toml:"socket_mode"`
	Listen          string  `toml:"listen"`
	LogLevel        string  `toml:"log_level"`
	LogFormat       string  `toml:"log_format"`
	ShutdownTimeout *string `toml:"shutdown_timeout"`
	MCPSessionIdle  *string `toml:"mcp_session_idle"`
	MCPMaxSessions  *int64  `toml:"mcp_max_sessions"`
	ReadTimeout     *string `toml:"read_timeout"`
	IdleTimeout     *string `toml:"idle_timeout"`
	WriteTimeout    *string `toml:"write_timeout"`
	TimerSlack      *string `toml:"timer_slack"`
}

type rawAgent struct {
	Name       string                 `toml:"name"`
	Workdir    string                 `toml:"workdir"`
	Upstreams  []string               `toml:"upstreams"` // nil: left out
	Transcript string                 `toml:"transcript"`
	Identity   map[string]rawIdentity `toml:"identity"`   // [agent.identity.UPSTREAM]
	DelxFleet  map[string]DelxFleet   `toml:"delx_fleet"` // [agent.delx_fleet.UPSTREAM]
	Users      []string               `toml:"users"`
	Groups     []string               `toml:"groups"`
}

// rawIdentity is an agent's own identity at a delx upstream.
type rawIdentity struct {
	AgentID   string `toml:"agent_id"`
	SessionID string `toml:"session_id"`
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
}

type rawUpstream struct {
	Kind      string   `toml:"kind"`
	URL       string   `toml:"url"`
	TokenEnv  string   `toml:"token_env"`
	TokenFile string   `toml:"token_file"`
	Rate      *float64 `toml:"rate"`
	Burst     *int64   `toml:"burst"`
	Timeout   *string  `toml:"timeout"`
	// RegistrationURL is delx only: where `delx register` posts.
	RegistrationURL string `toml:"registration_url"`
	// nats only.
	CredsFile      string  `toml:"creds_file"`
	NKeyFile       string  `toml:"nkey_file"`
	CAFile         string  `toml:"ca_file"`
	Stream         string  `toml:"stream"`
	Bucket         string  `toml:"bucket"`
	SubjectPrefix  string  `toml:"subject_prefix"`
	Replicas       *int64  `toml:"replicas"`
	ConflictWindow *string `toml:"conflict_window"`
	Snapshots      *bool   `toml:"snapshots"`
}

type rawGuard struct {
	AllowedLinkDomains []string `toml:"allowed_link_domains"` // nil: left out; empty: no links allowed
}

// maxConfigSize bounds the file read: a configuration is a few kilobytes,
// and a huge file is the wrong file (and slow to report on).
const maxConfigSize = 1 << 20

func decode(data []byte, name string, env environ) (*Config, error) {
	if len(data) > maxConfigSize {
		return nil, Errors{{File: name, Msg: fmt.Sprintf("is %d bytes; a configuration file may be at most %d KiB", len(data), maxConfigSize>>10)}}
	}
	c := &checker{file: name, ix: indexDocument(data), env: env}
	c.checkTypes()
	typesOK := len(c.errs) == 0
	var raw rawConfig
	err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&raw)
	var missing *toml.StrictMissingError
	switch {
	case errors.As(err, &missing):
		// go-toml reports unknown keys only once the rest is decoded, so
		// the values can still be checked: one round reports both.
		for i := range missing.Errors {
			c.unknownKey(&missing.Errors[i])
		}
	case err != nil:
		c.decodeError(err, data)
	}
	// Values of the wrong type would only lead to confusing follow-up
	// errors, and what go-toml did with them is of no use.
	if typesOK && (err == nil || missing != nil) {
		cfg := c.build(&raw)
		if len(c.errs) == 0 {
			return cfg, nil
		}
	}
	sortErrors(c.errs)
	return nil, c.errs
}

// checkTypes reports every value of the wrong type at once. go-toml stops at
// the first, and lets some through: it decodes a [table] into a slice as one
// element, so `[agent]` would pass for `[[agent]]`.
func (c *checker) checkTypes() {
	for _, e := range c.ix.entries {
		if spec, ok := specOf(e.path); ok && !spec.accepts(e.kind) {
			line, col := c.ix.position(e.start)
			c.errs = append(c.errs, &Error{File: c.file, Line: line, Column: col, Key: e.path, Msg: "must be " + spec.want + c.gotEntry(e)})
		}
	}
}

// unknownKey reports a key (or table) of the file the schema does not have.
func (c *checker) unknownKey(de *toml.DecodeError) {
	line, col := de.Position()
	e, ok := c.ix.at(c.ix.offset(line, col))
	path := e.path
	if !ok {
		path = keyFromParts(de.Key())
	}
	table := e.kind == unstable.Table || e.kind == unstable.ArrayTable
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Column: col, Key: path, Msg: unknownKeyMsg(path, table)})
}

// decodeError reports what stopped go-toml: a syntax error, a duplicate key,
// or a value of the wrong type. It is reported at the key it concerns.
func (c *checker) decodeError(err error, data []byte) {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		c.errs = append(c.errs, &Error{File: c.file, Msg: err.Error()})
		return
	}
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	line, col := de.Position()
	off := c.ix.offset(line, col)
	e, ok := c.ix.at(off)
	if !ok {
		// A syntax error: the broken expression is not in the index.
		c.errs = append(c.errs, &Error{File: c.file, Line: line, Column: col, Key: c.ix.brokenKey(data, off), Msg: "invalid TOML: " + msg})
		return
	}
	if spec, known := specOf(e.path); known && !spec.accepts(e.kind) {
		return // checkTypes has said it better
	}
	line, col = c.ix.position(e.start)
	if orig, dup := c.ix.earlier(e); dup {
		l, k := c.ix.position(orig.start)
		msg = fmt.Sprintf("set twice; first at %d:%d", l, k)
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Column: col, Key: e.path, Msg: msg})
}

// gotEntry is the "(got …)" of a value of the wrong type: the value itself
// when it is a scalar, else what kind of value it is, which is also all that
// is said of a key that may hold a secret.
func (c *checker) gotEntry(e keyEntry) string {
	switch {
	case !e.scalar || secretKey(e.path):
		return " (got " + kindName(e.kind) + ")"
	case e.kind == unstable.String:
		return got(e.value)
	}
	return " (got " + shorten(e.value) + ")" // a number, boolean or date as written
}

// brokenKey guesses the key of a syntax error found in a value, the common
// case (`rate = `, `name = "unterminated`): the text before the '=' of the
// error's line is parsed on its own as a key. It gives up ("") when the
// error is in a key, a header, or a value that began on an earlier line.
func (ix *keyIndex) brokenKey(data []byte, off int) string {
	if off < 0 || off > len(data) {
		return ""
	}
	line, _ := ix.position(off)
	start := ix.lines[line-1]
	eq := bytes.IndexByte(data[start:off], '=')
	if eq < 0 {
		return ""
	}
	var p unstable.Parser
	p.Reset(append(bytes.Clone(data[start:start+eq]), "= 0"...))
	if !p.NextExpression() || p.Expression().Kind != unstable.KeyValue {
		return ""
	}
	path := ix.table
	for _, k := range keyParts(p.Expression()) {
		path = joinKey(path, string(k.Data))
	}
	return path
}

func keyFromParts(parts []string) string {
	path := ""
	for _, p := range parts {
		path = joinKey(path, p)
	}
	return path
}
