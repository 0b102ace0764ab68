package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testEnv is a non-root user with a home and a runtime directory, so that
// results do not depend on who runs the tests.
func testEnv() environ {
	return envWith(1000, map[string]string{"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"})
}

func envWith(euid int, vars map[string]string) environ {
	return environ{
		lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		euid:   euid,
		getwd:  func() (string, error) { return "/work/dir", nil },
	}
}

// src joins lines into a document, so a test reads with its line numbers.
func src(lines ...string) string {
	return strings.Join(lines, "\n") + "\n"
}

func mustDecode(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := decode([]byte(doc), "f.toml", testEnv())
	if err != nil {
		t.Fatalf("decode failed:\n%v\ndocument:\n%s", err, doc)
	}
	return c
}

// decodeErrors decodes a document that must be refused.
func decodeErrors(t *testing.T, doc string) Errors {
	t.Helper()
	c, err := decode([]byte(doc), "f.toml", testEnv())
	if err == nil {
		t.Fatalf("decode accepted:\n%s\nas %+v", doc, c)
	}
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("error is %T %v, want Errors", err, err)
	}
	if c != nil {
		t.Errorf("decode returned a config with its error")
	}
	return es
}

func TestDecodeEmptyGivesDefaults(t *testing.T) {
	c := mustDecode(t, "")
	want := &Config{
		Daemon: Daemon{
			StateDir:        "/home/u/.local/state/continuityd",
			Socket:          "/run/user/1000/continuityd/continuityd.sock",
			SocketMode:      "0600",
			LogLevel:        "info",
			LogFormat:       "text",
			ShutdownTimeout: Duration{10 * time.Second},
			MCPSessionIdle:  Duration{30 * time.Minute}, MCPMaxSessions: 256, TimerSlack: Duration{time.Millisecond},
			ReadTimeout: Duration{10 * time.Second}, IdleTimeout: Duration{30 * time.Second}, WriteTimeout: Duration{30 * time.Second},
		},
		Agents:    []Agent{{Name: "default", Workdir: "/work/dir", Upstreams: []string{"local"}, Transcript: TranscriptAuto}},
		Upstreams: map[string]Upstream{},
		Guard:     Guard{AllowedLinkDomains: []string{"qdaybunker.fun", "dexscreener.com"}},
		Outbox:    defaultOutbox(),
		Watch:     defaultWatch(), Policy: defaultPolicy(), Transcripts: Transcripts{Enabled: true, ClaudeHome: "/home/u/.claude", CodexHome: "/home/u/.codex", Rescan: Duration{DefaultTranscriptRescan}},
		Snapshots: defaultSnapshots(),
		Places:    defaultPlaces(),
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestDecodeFullConfig(t *testing.T) {
	c := mustDecode(t, src(
		`[daemon]`,
		`state_dir = "~/state"`,
		`socket = "/tmp/cd.sock"`,
		`socket_mode = "660"`,
		`listen = "[::1]:7457"`,
		`log_level = "debug"`,
		`log_format = "json"`,
		`shutdown_timeout = "1m30s"`,
		``,
		`[[agent]]`,
		`name = "builder"`,
		`workdir = "~/src/builder/"`,
		`upstreams = ["qday", "delx", "local"]`,
		``,
		`[[agent]]`,
		`name = "reviewer"`,
		``,
		`[upstream.qday]`,
		`url = "https://qday.example/api"`,
		`token_env = "QDAY_TOKEN"`,
		`rate = 2`,
		``,
		`[upstream.delx]`,
		`kind = "delx"`,
		`url = "http://127.0.0.1:8080/v1/mcp"`,
		`token_file = "~/.config/continuityd/delx.token"`,
		`burst = 1`,
		`timeout = "5s"`,
		``,
		`[guard]`,
		`allowed_link_domains = []`,
	))
	want := &Config{
		Daemon: Daemon{
			StateDir:        "/home/u/state",
			Socket:          "/tmp/cd.sock",
			SocketMode:      "0660",
			Listen:          "[::1]:7457",
			LogLevel:        "debug",
			LogFormat:       "json",
			ShutdownTimeout: Duration{90 * time.Second},
			MCPSessionIdle:  Duration{30 * time.Minute}, MCPMaxSessions: 256, TimerSlack: Duration{time.Millisecond},
			ReadTimeout: Duration{10 * time.Second}, IdleTimeout: Duration{30 * time.Second}, WriteTimeout: Duration{30 * time.Second},
		},
		Agents: []Agent{
			{Name: "builder", Workdir: "/home/u/src/builder", Upstreams: []string{"qday", "delx", "local"}, Transcript: TranscriptAuto},
			{Name: "reviewer", Upstreams: []string{"local"}, Transcript: TranscriptAuto},
		},
		Upstreams: map[string]Upstream{
			"qday": {Kind: "qday", URL: "https://qday.example/api", TokenEnv: "QDAY_TOKEN", Rate: 2, Burst: 5, Timeout: Duration{30 * time.Second}},
			"delx": {Kind: "delx", URL: "http://127.0.0.1:8080/v1/mcp", TokenFile: "/home/u/.config/continuityd/delx.token", Rate: 1, Burst: 1, Timeout: Duration{5 * time.Second}},
		},
		Guard:  Guard{AllowedLinkDomains: []string{}},
		Outbox: defaultOutbox(),
		Watch:  defaultWatch(), Policy: defaultPolicy(), Transcripts: Transcripts{Enabled: true, ClaudeHome: "/home/u/.claude", CodexHome: "/home/u/.codex", Rescan: Duration{DefaultTranscriptRescan}},
		Snapshots: defaultSnapshots(),
		Places:    defaultPlaces(),
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestDefaultTOMLDecodes(t *testing.T) {
	c := mustDecode(t, string(DefaultTOML()))
	if !reflect.DeepEqual(c, mustDecode(t, "")) {
		t.Errorf("the default file differs from the built-in defaults: %+v", c)
	}
}

// The commented examples in the default file must be valid too, or a user
// who uncomments them gets an error from the file meant to teach them.
func TestDefaultTOMLExamplesDecode(t *testing.T) {
	example := regexp.MustCompile(`(?m)^# (\[|[a-z_]+ = )`)
	doc := example.ReplaceAllString(string(DefaultTOML()), "$1")
	c := mustDecode(t, doc)
	if len(c.Agents) != 1 || c.Agents[0].Name != "builder" || len(c.Upstreams) != 4 {
		t.Errorf("uncommented examples gave %+v", c)
	}
}

// Every key the file may hold is shown in the default file, set or
// commented out.
func TestDefaultTOMLShowsEveryKey(t *testing.T) {
	doc := string(DefaultTOML())
	for _, s := range keySpecs {
		key := lastPart(s.path)
		if key == "*" || strings.HasSuffix(s.path, "]") {
			continue
		}
		shown := regexp.MustCompile(`(?m)^(# )*(` + regexp.QuoteMeta(key) + ` = |\[+([a-z]+\.)?` + regexp.QuoteMeta(key) + `[\].])`)
		if !shown.MatchString(doc) {
			t.Errorf("default.toml does not show %s", s.path)
		}
	}
}

func TestDefaultTOMLIsACopy(t *testing.T) {
	b := DefaultTOML()
	b[0] = 'X'
	if DefaultTOML()[0] == 'X' {
		t.Error("DefaultTOML hands out the embedded bytes")
	}
}

func TestDefault(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	stateDir, socket := DefaultPaths()
	if len(c.Agents) != 1 || c.Agents[0].Name != "default" || c.Agents[0].Workdir != wd ||
		!reflect.DeepEqual(c.Agents[0].Upstreams, []string{"local"}) {
		t.Errorf("agents = %+v", c.Agents)
	}
	if c.Daemon.StateDir != stateDir || c.Daemon.Socket != socket {
		t.Errorf("paths = %q %q, DefaultPaths = %q %q", c.Daemon.StateDir, c.Daemon.Socket, stateDir, socket)
	}
	if c.Path != "" {
		t.Errorf("Path = %q", c.Path)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte(src(`[[agent]]`, `name = "a"`, `workdir = "/srv/a"`, `[daemon]`, `state_dir = "/srv/state"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != good || c.Agents[0].Name != "a" || c.AgentDir("a") != "/srv/state/agents/a" {
		t.Errorf("loaded %+v", c)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(src(`[daemon]`, `log_level = "loud"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	var e *Error
	if !errors.As(err, &e) || e.File != bad || e.Line != 2 || e.Key != "daemon.log_level" {
		t.Errorf("Load(bad) = %v", err)
	}
	if want := bad + `:2:1: daemon.log_level: must be one of debug, info, warn, error (got "loud")`; err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err, want)
	}

	if _, err := Load(filepath.Join(dir, "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
	if _, err := Load(""); err == nil {
		t.Error(`Load("") accepted`)
	}
}

func TestAccessors(t *testing.T) {
	c := mustDecode(t, src(
		`[[agent]]`, `name = "a"`, `upstreams = ["q"]`,
		`[upstream.q]`, `kind = "qday"`, `url = "https://q.example"`, `token_env = "T"`,
	))
	if a, ok := c.Agent("a"); !ok || a.Name != "a" {
		t.Errorf("Agent(a) = %+v, %v", a, ok)
	}
	if _, ok := c.Agent("b"); ok {
		t.Error("Agent(b) found")
	}
	if u, ok := c.UpstreamFor("q"); !ok || u.Kind != "qday" {
		t.Errorf("UpstreamFor(q) = %+v, %v", u, ok)
	}
	u, ok := c.UpstreamFor("local")
	if want := (Upstream{Kind: "local", Rate: 1000, Burst: 1000, Timeout: Duration{30 * time.Second}}); !ok || u != want {
		t.Errorf("UpstreamFor(local) = %+v, %v", u, ok)
	}
	if _, ok := c.UpstreamFor("nope"); ok {
		t.Error("UpstreamFor(nope) found")
	}
	if got := c.AgentDir("a"); got != "/home/u/.local/state/continuityd/agents/a" {
		t.Errorf("AgentDir = %q", got)
	}
	if got := c.Daemon.SocketPerm(); got != 0o600 {
		t.Errorf("SocketPerm = %o", got)
	}
}

func TestKindDefaults(t *testing.T) {
	c := mustDecode(t, src(
		`[upstream.qday]`, `url = "https://q.example"`, `token_env = "Q"`,
		`[upstream.delx]`, `url = "https://d.example"`, `token_env = "D"`,
		`[upstream.local]`,
		`[upstream.archive]`, `kind = "local"`, `rate = 5`,
	))
	for name, want := range map[string]Upstream{
		"qday":    {Kind: "qday", URL: "https://q.example", TokenEnv: "Q", Rate: 1, Burst: 5, Timeout: Duration{30 * time.Second}},
		"delx":    {Kind: "delx", URL: "https://d.example", TokenEnv: "D", Rate: 1, Burst: 5, Timeout: Duration{30 * time.Second}},
		"local":   {Kind: "local", Rate: 1000, Burst: 1000, Timeout: Duration{30 * time.Second}},
		"archive": {Kind: "local", Rate: 5, Burst: 1000, Timeout: Duration{30 * time.Second}},
	} {
		if got := c.Upstreams[name]; got != want {
			t.Errorf("%s = %+v, want %+v", name, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1h2m3.5s")); err != nil || d.Duration != time.Hour+2*time.Minute+3500*time.Millisecond {
		t.Errorf("UnmarshalText = %v, %v", d, err)
	}
	if b, _ := d.MarshalText(); string(b) != "1h2m3.5s" {
		t.Errorf("MarshalText = %s", b)
	}
	for _, bad := range []string{"", "10", "10 parsecs", "-1s"} {
		if err := d.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) accepted", bad)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "f.toml", Line: 3, Column: 7, Key: "daemon.socket", Msg: "bad"}
	if e.Error() != "f.toml:3:7: daemon.socket: bad" {
		t.Error(e.Error())
	}
	e = &Error{File: "f.toml", Key: "daemon.socket", Msg: "bad"}
	if e.Error() != "f.toml: daemon.socket: bad" {
		t.Error(e.Error())
	}
	e = &Error{File: "f.toml", Line: 1, Column: 2, Msg: "invalid TOML: x"}
	if e.Error() != "f.toml:1:2: invalid TOML: x" {
		t.Error(e.Error())
	}
	es := Errors{e, e}
	if es.Error() != e.Error()+"\n"+e.Error() {
		t.Error(es.Error())
	}
	if got := got(strings.Repeat("é", 100)); !strings.HasSuffix(got, `…")`) || strings.Contains(got, `\x`) {
		t.Errorf("long value shown as %s", got)
	}
}

func defaultOutbox() Outbox {
	return Outbox{MaxPending: 10000, MinBackoff: Duration{time.Second}, MaxBackoff: Duration{5 * time.Minute},
		MaxRetryAfter: Duration{10 * time.Minute}, UnauthorizedRetry: Duration{5 * time.Minute}, ResumeTimeout: Duration{1500 * time.Millisecond}}
}

func TestOutboxValues(t *testing.T) {
	for _, tc := range []struct {
		src, key string
		line     int
	}{
		{"[outbox]\nmax_pending = 0\n", "outbox.max_pending", 2},
		{"[outbox]\nmin_backoff = \"10m\"\nmax_backoff = \"1m\"\n", "outbox.min_backoff", 2},
		{"[outbox]\nresume_timeout = \"0s\"\n", "outbox.resume_timeout", 2},
	} {
		_, err := Decode([]byte(tc.src), "c.toml")
		var errs Errors
		if !errors.As(err, &errs) || errs[0].Key != tc.key || errs[0].Line != tc.line {
			t.Fatalf("%q: %v", tc.src, err)
		}
	}
	cfg, err := Decode([]byte("[outbox]\nmax_pending = 1\n"), "c.toml")
	if err != nil || cfg.Outbox.MaxPending != 1 {
		t.Fatalf("max_pending 1: %v %+v", err, cfg)
	}
}

func defaultWatch() Watch {
	return Watch{Enabled: true, Ignore: []string{}, IgnoreDirs: DefaultIgnoreDirs(), Quiet: Duration{2 * time.Second}, Settle: Duration{300 * time.Millisecond}, ShellMax: Duration{10 * time.Minute},
		HandoffFile: "HANDOFF.md", CapsuleFile: ".continuity/capsule.json"}
}

func defaultPolicy() Policy {
	return Policy{Enabled: true, Quiet: Duration{20 * time.Second}, MaxDelay: Duration{5 * time.Minute}, MinInterval: Duration{time.Minute},
		Thresholds: []float64{0.5, 0.7, 0.85}, IdleAfter: Duration{10 * time.Minute}, Refresh: Duration{45 * time.Minute},
		PublicStatus: "auto", SealOnCompaction: true, SealOnSessionEnd: true}
}

// TestDefaultTOMLIgnoreDirsAreTheWatchersDefault: the list written out in
// default.toml (what runs without a config file) is the watcher's own.
func TestDefaultTOMLIgnoreDirsAreTheWatchersDefault(t *testing.T) {
	cfg, err := Decode(DefaultTOML(), "default.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Watch.IgnoreDirs, DefaultIgnoreDirs()) {
		t.Fatalf("default.toml ignore_dirs %v, watcher default %v", cfg.Watch.IgnoreDirs, DefaultIgnoreDirs())
	}
}

func defaultSnapshots() Snapshots {
	return Snapshots{Enabled: true, MaxFileSize: DefaultSnapshotMaxFileSize, Keep: DefaultSnapshotKeep, KeepBytes: DefaultSnapshotKeepBytes,
		Journal: true, JournalKeepAll: Duration{24 * time.Hour}, JournalKeepHourly: Duration{7 * 24 * time.Hour}, JournalShare: 0.5}
}

func TestSnapshotsTableIsStrict(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"[snapshots]\nkeep = 0\n", "snapshots.keep"},
		{"[snapshots]\nkeep_bytes = 10\n", "snapshots.keep_bytes"},
		{"[snapshots]\nmax_file_size = -1\n", "snapshots.max_file_size"},
		{"[snapshots]\nenabled = \"yes\"\n", "snapshots.enabled"},
		{"[snapshots]\nkeep_count = 3\n", "keep_count"},
		{"[snapshots]\nfleet_withhold = \"*.tfstate\"\n", "snapshots.fleet_withhold"},
		{"[snapshots]\nfleet_withhold = [\"\"]\n", "snapshots.fleet_withhold[0]"},
		{"[snapshots]\nfleet_withhold = [\"ok/*\", \"/etc/*\"]\n", "snapshots.fleet_withhold[1]"},
		{"[snapshots]\nfleet_withhold = [\"../up\"]\n", "snapshots.fleet_withhold[0]"},
		{"[snapshots]\nfleet_withhold = [\"[a-\"]\n", "snapshots.fleet_withhold[0]"},
		{"[snapshots]\nfleet_withhold = [3]\n", "snapshots.fleet_withhold[0]"},
	} {
		_, err := Decode([]byte(tc.body), "x.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", tc.body, err, tc.want)
		}
	}
	cfg, err := Decode([]byte("[snapshots]\nenabled = false\nmax_file_size = 0\nkeep = 5\nkeep_bytes = 2097152\non_explicit_checkpoint = true\nfleet_withhold = [\"*.tfstate\", \"secrets/*\"]\n"), "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Snapshots{MaxFileSize: 0, Keep: 5, KeepBytes: 2 << 20, OnExplicitCheckpoint: true,
		FleetWithhold: []string{"*.tfstate", "secrets/*"}, Journal: true, JournalKeepAll: Duration{24 * time.Hour},
		JournalKeepHourly: Duration{7 * 24 * time.Hour}, JournalShare: 0.5}); !reflect.DeepEqual(cfg.Snapshots, want) {
		t.Errorf("got %+v, want %+v", cfg.Snapshots, want)
	}
}
