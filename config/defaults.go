package config

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/natsrules"
	"github.com/continuityd/continuityd/internal/timerslack"
)

// Upstream kinds.
const (
	KindQDay  = "qday"  // the Q-Day continuity API
	KindDelx  = "delx"  // Delx Continuity Capsules over MCP
	KindLocal = "local" // the local archive, in the state directory
	KindNATS  = "nats"  // a fleet of daemons sharing agents through NATS JetStream
)

// LocalUpstream is the upstream every agent may name without declaring it.
const LocalUpstream = "local"

// The MCP session limits' defaults (daemon.mcp_session_idle and
// daemon.mcp_max_sessions), also what the daemon uses when a Config built
// in code leaves them zero.
const (
	DefaultMCPSessionIdle = 30 * time.Minute
	DefaultMCPMaxSessions = 256
)

// The local API's connection timeouts' defaults (daemon.read_timeout,
// daemon.idle_timeout and daemon.write_timeout), also what the daemon uses
// when a Config built in code leaves them zero.
const (
	DefaultReadTimeout  = 10 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

// DefaultTimerSlack is daemon.timer_slack's default: the Go runtime's
// monitor then wakes about once a millisecond while the daemon works,
// not every 20 µs. The continuityd front gives it when it hands `run` to
// the daemon (internal/timerslack).
const DefaultTimerSlack = timerslack.Default

// maxTimerSlack bounds daemon.timer_slack: the daemon's shortest waits
// are tens of milliseconds.
const maxTimerSlack = 10 * time.Millisecond

// DefaultAgent names the agent the daemon serves when the file has none.
const DefaultAgent = "default"

// The values of an agent's transcript key: whose transcripts it follows
// when no hook names one (the names the hook gives the agents it knows).
const (
	TranscriptAuto       = "auto"        // Claude Code's or Codex's, the newest no other agent on the workdir follows
	TranscriptClaudeCode = "claude-code" // Claude Code's only (transcripts.claude_home)
	TranscriptCodex      = "codex"       // Codex's only (transcripts.codex_home)
	TranscriptOff        = "off"         // none
)

// Defaults of [daemon] and [guard] that do not depend on the host.
const (
	defaultSocketMode      = "0600" // only the daemon's user may talk to it
	defaultLogLevel        = "info"
	defaultLogFormat       = "text"
	defaultShutdownTimeout = 10 * time.Second
	defaultUpstreamTimeout = 30 * time.Second
)

// defaultLinkDomains are the domains Q-Day accepts links to in a public
// status; the guard refuses others before Q-Day would.
func defaultLinkDomains() []string {
	return []string{"qdaybunker.fun", "dexscreener.com"}
}

// kindDefaults is an upstream of the given kind with its default limits.
func kindDefaults(kind string) Upstream {
	u := Upstream{Kind: kind, Timeout: Duration{defaultUpstreamTimeout}}
	switch kind {
	case KindLocal:
		// A local write costs a file append; the limit only stops a runaway.
		u.Rate, u.Burst = 1000, 1000
	case KindNATS:
		// A JetStream publish is cheap for the server; the limit keeps a
		// runaway agent from flooding a shared fleet.
		u.Rate, u.Burst, u.Timeout = 50, 100, Duration{natsrules.DefaultTimeout}
		u.Stream, u.Bucket, u.SubjectPrefix = natsrules.DefaultStream, natsrules.DefaultBucket, natsrules.DefaultSubjectPrefix
		u.Replicas, u.ConflictWindow = natsrules.DefaultReplicas, Duration{natsrules.DefaultConflictWindow}
	default:
		// Delx allows 60 requests per 60 s per client, and Q-Day's
		// published design defaults to 60 a minute per agent.
		u.Rate, u.Burst = 1.0, 5
	}
	return u
}

// FHS places for a daemon run by root (a system service).
const (
	fhsStateDir = "/var/lib/continuityd"
	fhsSocket   = "/run/continuityd/continuityd.sock"
)

// SystemPaths are the FHS places a system service uses, whoever asks: a
// client that addresses the system daemon's socket finds its state there.
func SystemPaths() (stateDir, socket string) { return fhsStateDir, fhsSocket }

// DefaultPaths is where state and socket go when the file does not say:
// for root the FHS places /var/lib/continuityd and
// /run/continuityd/continuityd.sock; for anyone else the XDG ones,
// $XDG_STATE_HOME/continuityd (default ~/.local/state/continuityd) and
// $XDG_RUNTIME_DIR/continuityd/continuityd.sock, or
// <stateDir>/continuityd.sock when there is no runtime directory.
func DefaultPaths() (stateDir, socket string) {
	home, _ := os.LookupEnv("HOME")
	return defaultPaths(os.LookupEnv, os.Geteuid(), home)
}

// defaultPaths is DefaultPaths for a given environment, user and home.
func defaultPaths(lookup func(string) (string, bool), euid int, home string) (stateDir, socket string) {
	if euid == 0 {
		return fhsStateDir, fhsSocket
	}
	base := filepath.Join(home, ".local", "state")
	if dir, ok := xdgDir(lookup, "XDG_STATE_HOME"); ok {
		base = dir
	}
	stateDir = filepath.Join(base, "continuityd")
	return stateDir, userSocket(lookup, stateDir)
}

// PathsNote says why the daemon uses the state directory and socket it
// was given, when that is not what the user may expect: for root, the
// system's places rather than the XDG ones of the environment. It is ""
// when there is nothing to say (not root, or paths the file chose).
func PathsNote(stateDir, socket string) string {
	return pathsNote(os.LookupEnv, os.Geteuid(), stateDir, socket)
}

func pathsNote(lookup func(string) (string, bool), euid int, stateDir, socket string) string {
	if euid != 0 || stateDir != fhsStateDir && socket != fhsSocket {
		return ""
	}
	var ignored []string
	for _, name := range []string{"XDG_RUNTIME_DIR", "XDG_STATE_HOME"} {
		if v, ok := lookup(name); ok && v != "" {
			ignored = append(ignored, "$"+name+" ("+v+")")
		}
	}
	note := "running as root: state in " + stateDir + ", socket " + socket + ", the system's places for a service"
	if len(ignored) > 0 {
		note += "; " + strings.Join(ignored, " and ") + " ignored for root"
	}
	return note
}

// userSocket is a non-root user's default socket: in the runtime directory,
// which the system empties at logout, else beside the state it serves.
func userSocket(lookup func(string) (string, bool), stateDir string) string {
	if dir, ok := xdgDir(lookup, "XDG_RUNTIME_DIR"); ok {
		return filepath.Join(dir, "continuityd", "continuityd.sock")
	}
	return filepath.Join(stateDir, "continuityd.sock")
}

// xdgDir reads an XDG base directory variable. The XDG spec says a relative
// path in one is invalid and must be ignored.
func xdgDir(lookup func(string) (string, bool), name string) (string, bool) {
	dir, ok := lookup(name)
	if !ok || !filepath.IsAbs(dir) {
		return "", false
	}
	return dir, true
}

// environ is what Decode reads from the host, held apart so tests can set it
// without touching the process.
type environ struct {
	lookup func(string) (string, bool)
	euid   int
	getwd  func() (string, error)
}

func hostEnv() environ {
	return environ{lookup: os.LookupEnv, euid: os.Geteuid(), getwd: os.Getwd}
}

// home is $HOME, which "~/" stands for.
func (e environ) home() string {
	h, _ := e.lookup("HOME")
	return h
}

// DefaultIgnoreDirs are the directory names skipped (not watched, not
// reported) at any depth when [watch] ignore_dirs is not set: dependency trees,
// virtualenvs, caches and build outputs that tools regenerate, which are
// large, churn on every build, and would spend inotify watches for nothing.
// "vendor" is deliberately absent: Go repositories commit their vendor tree
// as source. Pass a non-nil empty slice to ignore no directory by name.
func DefaultIgnoreDirs() []string {
	return []string{
		"node_modules", "bower_components", "jspm_packages",
		".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
		".next", ".nuxt", ".svelte-kit", ".turbo", ".parcel-cache", ".cache",
		".gradle", ".terraform", ".direnv", ".idea",
		"target", "dist", "build", "coverage",
	}
}
