// Package config reads continuityd's TOML configuration: strictly (an
// unknown key, a wrong type or a bad value is an error naming the key and its
// line:column), with a default for every key, so that an empty file, or no
// file at all, gives a daemon that works.
//
// The key names of [daemon], [[agent]] and [upstream.NAME] are fixed by the
// product's interface (shared/design/interface.md); the rest are this
// package's. DefaultTOML is the commented reference of every key.
package config

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is the whole daemon configuration after defaults.
type Config struct {
	Daemon      Daemon              `toml:"daemon"`
	Agents      []Agent             `toml:"agent,omitempty"`
	Upstreams   map[string]Upstream `toml:"upstream"`
	Guard       Guard               `toml:"guard"`
	Outbox      Outbox              `toml:"outbox"`
	Watch       Watch               `toml:"watch"`
	Policy      Policy              `toml:"policy"`
	Transcripts Transcripts         `toml:"transcripts"`
	Snapshots   Snapshots           `toml:"snapshots"`
	Places      Places              `toml:"places"`
	Path        string              `toml:"-"` // file it was loaded from; "" for the embedded default
}

// Places is the [places] table: the projects agent sessions report from,
// each adopted as a place of its own (its own agent state, watcher,
// snapshots and transcripts), so one daemon serves every project a user
// works in without a line of configuration.
type Places struct {
	Adopt bool `toml:"adopt"` // default true
	// Roots are the only trees places are adopted under (never / or a
	// home itself). "~" and "~/dir" stay as written: they are the home of
	// the user whose project it is (a root service's caller), expanded
	// when a place is adopted; other entries are absolute. Default ["~"].
	Roots      []string `toml:"roots"`
	MaxWatched int      `toml:"max_watched"` // places watched at once; default 32
	IdleAfter  Duration `toml:"idle_after"`  // a place this long without a session is unwatched; default 8h
}

// RootsFor are the roots for a user whose home is home, absolute: "~"
// entries are home's (left out when home is not absolute).
func (p Places) RootsFor(home string) []string {
	var out []string
	for _, r := range p.Roots {
		switch {
		case r == "~" || strings.HasPrefix(r, "~/"):
			if filepath.IsAbs(home) {
				out = append(out, filepath.Join(home, r[1:]))
			}
		default:
			out = append(out, r)
		}
	}
	return out
}

// Watch is the [watch] table: how each agent's workdir is watched.
type Watch struct {
	Enabled     bool     `toml:"enabled"`      // default true
	Ignore      []string `toml:"ignore"`       // extra gitignore-style patterns, relative to the workdir
	IgnoreDirs  []string `toml:"ignore_dirs"`  // directory names never watched; default: node_modules, .venv, …
	Quiet       Duration `toml:"quiet"`        // activity is summarised after this long without change (default 2s)
	Settle      Duration `toml:"settle"`       // a file is taken as settled after this long without a write: the version journal's (default 300ms)
	ShellMax    Duration `toml:"shell_max"`    // a shell tool call without its end counts as the agent's this long at most (default 10m)
	HandoffFile string   `toml:"handoff_file"` // default "HANDOFF.md"
	CapsuleFile string   `toml:"capsule_file"` // default ".continuity/capsule.json"
}

// Policy is the [policy] table: when checkpoints are sent automatically.
type Policy struct {
	Enabled          bool      `toml:"enabled"`             // default true
	Quiet            Duration  `toml:"quiet"`               // default 20s
	MaxDelay         Duration  `toml:"max_delay"`           // default 5m
	MinInterval      Duration  `toml:"min_interval"`        // default 60s
	Thresholds       []float64 `toml:"thresholds"`          // default [0.5, 0.7, 0.85]
	IdleAfter        Duration  `toml:"idle_after"`          // default 10m
	Refresh          Duration  `toml:"refresh"`             // default 45m
	PublicStatus     string    `toml:"public_status"`       // auto (on when an agent ships to a qday upstream) | on | off
	SealOnCompaction bool      `toml:"seal_on_compaction"`  // default true
	SealOnSessionEnd bool      `toml:"seal_on_session_end"` // default true
}

// Transcripts is the [transcripts] table: where agents' transcripts are
// found, to follow context usage and compactions.
type Transcripts struct {
	Enabled    bool   `toml:"enabled"`     // default true
	ClaudeHome string `toml:"claude_home"` // default ~/.claude
	CodexHome  string `toml:"codex_home"`  // default ~/.codex
	// Rescan is how often the follower looks for a new session without a
	// file event: a safety net under the directory watches (default 30s).
	Rescan Duration `toml:"rescan"`
}

// Snapshots is the [snapshots] table: the work snapshots each agent's
// automatic checkpoints take of its workdir (a shadow store in the agent's
// state directory, never the agent's own repository).
type Snapshots struct {
	Enabled              bool  `toml:"enabled"`                // default true
	MaxFileSize          int64 `toml:"max_file_size"`          // bytes; a larger file is skipped and listed; 0 = no limit (default 8 MiB)
	Keep                 int   `toml:"keep"`                   // snapshots kept per agent (default 200)
	KeepBytes            int64 `toml:"keep_bytes"`             // store size kept per agent, bytes (default 512 MiB)
	OnExplicitCheckpoint bool  `toml:"on_explicit_checkpoint"` // also snapshot after each of the agent's own checkpoints (default false)
	// FleetWithhold are glob patterns of files never shipped to the fleet
	// (a nats upstream's `snapshots = true`), besides the well-known
	// credential files and those the secret guard flags. Default none.
	FleetWithhold []string `toml:"fleet_withhold"`
	// Journal keeps every version of every file the watcher saw settle
	// (the version journal: history, restore --at). Default true.
	Journal bool `toml:"journal"`
	// JournalKeepAll keeps every version this long (default 24h), then
	// the newest of each hour until JournalKeepHourly (default 168h),
	// then the newest of each day.
	JournalKeepAll    Duration `toml:"journal_keep_all"`
	JournalKeepHourly Duration `toml:"journal_keep_hourly"`
	// JournalShare is the part of keep_bytes the journal's versions may
	// take, 0.05 to 0.95 (default 0.5).
	JournalShare float64 `toml:"journal_share"`
}

// Outbox is the [outbox] table: how accepted writes wait for and are retried
// against the upstreams.
type Outbox struct {
	// MaxPending bounds, per agent, the writes no upstream has taken yet:
	// past it explicit writes get 507 SPOOL_FULL and automatic ones are
	// coalesced. Default 10000.
	MaxPending int `toml:"max_pending"`
	// MinBackoff and MaxBackoff bound the exponential backoff with full
	// jitter after 5xx, timeouts and connection errors. Default 1s and 5m.
	MinBackoff Duration `toml:"min_backoff"`
	MaxBackoff Duration `toml:"max_backoff"`
	// MaxRetryAfter caps how long a 429's Retry-After is honoured. Default 10m.
	MaxRetryAfter Duration `toml:"max_retry_after"`
	// UnauthorizedRetry is the wait after a 401/403; a reload retries at
	// once. Default 5m.
	UnauthorizedRetry Duration `toml:"unauthorized_retry"`
	// ResumeTimeout bounds how long a resume waits for the upstreams' own
	// views before answering from local state with degraded set. Default 1.5s.
	ResumeTimeout Duration `toml:"resume_timeout"`
}

// Daemon is the [daemon] table: where the daemon keeps its state, where it
// listens, and how it logs.
type Daemon struct {
	StateDir        string   `toml:"state_dir"`
	Socket          string   `toml:"socket"`
	SocketMode      string   `toml:"socket_mode"`      // octal, default "0600"
	Listen          string   `toml:"listen"`           // "" or a loopback host:port
	LogLevel        string   `toml:"log_level"`        // debug|info|warn|error, default info
	LogFormat       string   `toml:"log_format"`       // text|json, default text
	ShutdownTimeout Duration `toml:"shutdown_timeout"` // default "10s"
	// MCPSessionIdle closes an MCP session (/mcp) that has had no request
	// for this long; MCPMaxSessions bounds the sessions open at once.
	MCPSessionIdle Duration `toml:"mcp_session_idle"` // default "30m"
	MCPMaxSessions int      `toml:"mcp_max_sessions"` // default 256
	// ReadTimeout, IdleTimeout and WriteTimeout bound what a client of the
	// local API may hold: a request's headers, then its body, must each
	// arrive within ReadTimeout; a keep-alive connection idle for
	// IdleTimeout is closed; an ordinary answer gets WriteTimeout.
	ReadTimeout  Duration `toml:"read_timeout"`  // default "10s"
	IdleTimeout  Duration `toml:"idle_timeout"`  // default "30s"
	WriteTimeout Duration `toml:"write_timeout"` // default "30s"
	// TimerSlack is how late the kernel may fire the daemon's timers to
	// fire several at once (Linux only; a Config built in code that leaves
	// it zero keeps the slack the process has): see internal/timerslack.
	TimerSlack Duration `toml:"timer_slack"` // default "1ms"
}

// Agent is one [[agent]] table: an agent whose continuity the daemon keeps.
type Agent struct {
	Name      string   `toml:"name"`      // ^[a-z0-9][a-z0-9_-]{0,62}$ (it names a directory)
	Workdir   string   `toml:"workdir"`   // absolute after ~ expansion; "" = none
	Upstreams []string `toml:"upstreams"` // default ["local"]
	// Transcript says whose transcripts the agent follows when no hook
	// names one: TranscriptAuto (either agent's), TranscriptClaudeCode,
	// TranscriptCodex, or TranscriptOff (none). Agents sharing a workdir
	// never follow the same transcript: set it where they are of
	// different kinds and run without hooks.
	Transcript string `toml:"transcript"`
	// Identity holds the agent's own identity at each delx upstream that
	// has one in the file ([agent.identity.UPSTREAM]). An agent without one
	// uses what `continuityd delx register` kept in its state directory.
	Identity map[string]DelxIdentity `toml:"identity"`
	// DelxFleet names the Delx fleet the agent is a member of at each
	// delx upstream that has one ([agent.delx_fleet.UPSTREAM]).
	DelxFleet map[string]DelxFleet `toml:"delx_fleet,omitempty"`
	// Users and Groups name who else may use the agent on a shared socket
	// (socket_mode "0660"): user and group names or numeric ids. Root and
	// the daemon's own user always may; with neither key, the owner of the
	// workdir may too. UIDs and GIDs are the names resolved when the file
	// is checked (a name that resolves to nothing is an error).
	Users  []string `toml:"users,omitempty"`
	Groups []string `toml:"groups,omitempty"`
	UIDs   []uint32 `toml:"-"`
	GIDs   []uint32 `toml:"-"`
}

// DelxIdentity is an agent's identity at a Delx upstream, registered
// elsewhere: the agent_id and session_id Delx issued and where its token is
// (token_env or token_file, never the token itself).
type DelxIdentity struct {
	AgentID   string `toml:"agent_id"`
	SessionID string `toml:"session_id"`
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
}

// Upstream is one [upstream.NAME] table: a service the agents' checkpoints
// are delivered to.
type Upstream struct {
	Kind      string   `toml:"kind"` // qday | delx | local | nats
	URL       string   `toml:"url"`
	TokenEnv  string   `toml:"token_env"`
	TokenFile string   `toml:"token_file"`
	Rate      float64  `toml:"rate"`    // requests per second, > 0
	Burst     int      `toml:"burst"`   // >= 1
	Timeout   Duration `toml:"timeout"` // per request, default "30s"
	// RegistrationURL (delx only) is where `continuityd delx register`
	// posts; "" derives it from URL's host (/api/v1/agents/register).
	RegistrationURL string `toml:"registration_url"`
	// A nats (fleet) upstream's keys. URL then holds one or more servers
	// separated by commas; at most one of CredsFile, NKeyFile and the token.
	CredsFile      string   `toml:"creds_file,omitempty"`      // a NATS credentials file (JWT + NKey seed)
	NKeyFile       string   `toml:"nkey_file,omitempty"`       // a file holding an NKey seed
	CAFile         string   `toml:"ca_file,omitempty"`         // PEM CAs trusted for TLS; "" the system's
	Stream         string   `toml:"stream,omitempty"`          // default "CONTINUITYD"
	Bucket         string   `toml:"bucket,omitempty"`          // default "continuityd"
	SubjectPrefix  string   `toml:"subject_prefix,omitempty"`  // default "continuityd"
	Replicas       int      `toml:"replicas,omitempty"`        // of a stream or bucket it creates; default 1
	ConflictWindow Duration `toml:"conflict_window,omitempty"` // default 10m
	// Snapshots ships the agents' work snapshots to the fleet's object
	// store (bucket BUCKET-snapshots), so a restore works on another
	// machine. Off by default: snapshot content then stays on the machine.
	Snapshots bool `toml:"snapshots,omitempty"`
}

// URLs are a nats upstream's servers, split on commas.
func (u Upstream) URLs() []string {
	var out []string
	for _, s := range strings.Split(u.URL, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Guard is the [guard] table: the local checks applied to what agents write
// before anything is stored or sent.
type Guard struct {
	AllowedLinkDomains []string `toml:"allowed_link_domains"` // default ["qdaybunker.fun","dexscreener.com"]
}

// Agent returns the agent called name.
func (c *Config) Agent(name string) (Agent, bool) {
	for _, a := range c.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// UpstreamFor returns the upstream called name. "local" always resolves,
// declared or not, because every agent may use the local archive without
// configuring it.
func (c *Config) UpstreamFor(name string) (Upstream, bool) {
	if u, ok := c.Upstreams[name]; ok {
		return u, true
	}
	if name == LocalUpstream {
		return kindDefaults(KindLocal), true
	}
	return Upstream{}, false
}

// AgentDir is the directory holding the named agent's durable state.
func (c *Config) AgentDir(name string) string {
	return filepath.Join(c.Daemon.StateDir, "agents", name)
}

// SocketPerm is SocketMode as a file mode. A validated Config always parses;
// should an unvalidated one not, the safe 0600 is returned.
func (d Daemon) SocketPerm() fs.FileMode {
	m, err := strconv.ParseUint(d.SocketMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0o600
	}
	return fs.FileMode(m)
}
