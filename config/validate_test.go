package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/safesocket"
)

// One case per rule: the document must be refused with an error on key, at
// line:col, whose message contains msg.
type errCase struct {
	name      string
	doc       string
	key       string
	line, col int
	msg       string
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es := decodeErrors(t, tc.doc)
			for _, e := range es {
				if e.Key == tc.key {
					if e.Line != tc.line || e.Column != tc.col {
						t.Errorf("%s at %d:%d, want %d:%d", e.Key, e.Line, e.Column, tc.line, tc.col)
					}
					if !strings.Contains(e.Msg, tc.msg) {
						t.Errorf("message %q lacks %q", e.Msg, tc.msg)
					}
					if e.File != "f.toml" {
						t.Errorf("file %q", e.File)
					}
					return
				}
			}
			t.Errorf("no error on %s; got:\n%v", tc.key, es)
		})
	}
}

// okCase must be accepted.
func runOKCases(t *testing.T, docs map[string]string) {
	t.Helper()
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) { mustDecode(t, doc) })
	}
}

func TestValidateDaemon(t *testing.T) {
	runErrCases(t, []errCase{
		{"relative state_dir", src(`[daemon]`, `state_dir = "var/lib"`), "daemon.state_dir", 2, 1, `must be an absolute path (or start with ~/) (got "var/lib")`},
		{"~user state_dir", src(`[daemon]`, `  state_dir = "~bob/x"`), "daemon.state_dir", 2, 3, "only ~/"},
		{"relative socket", src(`[daemon]`, `socket = "cd.sock"`), "daemon.socket", 2, 1, "must be an absolute path"},
		{"socket_mode not octal", src(`[daemon]`, `socket_mode = "rw-------"`), "daemon.socket_mode", 2, 1, `must be an octal mode from "0600" to "0777" (got "rw-------")`},
		{"socket_mode 8", src(`[daemon]`, `socket_mode = "0800"`), "daemon.socket_mode", 2, 1, "must be an octal mode"},
		{"socket_mode sticky", src(`[daemon]`, `socket_mode = "01777"`), "daemon.socket_mode", 2, 1, "must be an octal mode"},
		{"socket_mode owner read only", src(`[daemon]`, `socket_mode = "0400"`), "daemon.socket_mode", 2, 1, "owner read and write"},
		{"listen all interfaces", src(`[daemon]`, `listen = "0.0.0.0:7457"`), "daemon.listen", 2, 1, "must be a loopback address; the API is not meant for the network"},
		{"listen no host", src(`[daemon]`, `listen = ":7457"`), "daemon.listen", 2, 1, "loopback"},
		{"listen name", src(`[daemon]`, `listen = "example.com:7457"`), "daemon.listen", 2, 1, "loopback"},
		{"listen zone", src(`[daemon]`, `listen = "[::1%lo]:7457"`), "daemon.listen", 2, 1, "loopback"},
		{"listen no port", src(`[daemon]`, `listen = "127.0.0.1"`), "daemon.listen", 2, 1, "host:port"},
		{"listen port 0", src(`[daemon]`, `listen = "127.0.0.1:0"`), "daemon.listen", 2, 1, "port number"},
		{"listen port too big", src(`[daemon]`, `listen = "127.0.0.1:65536"`), "daemon.listen", 2, 1, "port number"},
		{"log_level", src(`[daemon]`, `log_level = "verbose"`), "daemon.log_level", 2, 1, `must be one of debug, info, warn, error (got "verbose")`},
		{"log_format", src(`[daemon]`, `log_format = "xml"`), "daemon.log_format", 2, 1, "must be one of text, json"},
		{"shutdown zero", src(`[daemon]`, `shutdown_timeout = "0s"`), "daemon.shutdown_timeout", 2, 1, `must be more than zero (got "0s")`},
		{"mcp idle zero", src(`[daemon]`, `mcp_session_idle = "0s"`), "daemon.mcp_session_idle", 2, 1, `must be more than zero (got "0s")`},
		{"mcp idle short", src(`[daemon]`, `mcp_session_idle = "500ms"`), "daemon.mcp_session_idle", 2, 1, `must be from 1s to 24h (got "500ms")`},
		{"mcp idle long", src(`[daemon]`, `mcp_session_idle = "25h"`), "daemon.mcp_session_idle", 2, 1, `must be from 1s to 24h`},
		{"mcp idle number", src(`[daemon]`, `mcp_session_idle = 30`), "daemon.mcp_session_idle", 2, 1, `duration`},
		{"read timeout short", src(`[daemon]`, `read_timeout = "500ms"`), "daemon.read_timeout", 2, 1, `must be from 1s to 1h (got "500ms")`},
		{"idle timeout zero", src(`[daemon]`, `idle_timeout = "0s"`), "daemon.idle_timeout", 2, 1, `must be more than zero (got "0s")`},
		{"write timeout long", src(`[daemon]`, `write_timeout = "2h"`), "daemon.write_timeout", 2, 1, `must be from 1s to 1h (got "2h")`},
		{"timer slack long", src(`[daemon]`, `timer_slack = "20ms"`), "daemon.timer_slack", 2, 1, `must be from 1us to 10ms (got "20ms")`},
		{"timer slack zero", src(`[daemon]`, `timer_slack = "0s"`), "daemon.timer_slack", 2, 1, `must be more than zero (got "0s")`},
		{"timer slack short", src(`[daemon]`, `timer_slack = "500ns"`), "daemon.timer_slack", 2, 1, `must be from 1us to 10ms (got "500ns")`},
		{"timer slack negative", src(`[daemon]`, `timer_slack = "-1ms"`), "daemon.timer_slack", 2, 1, `must not be negative (got "-1ms")`},
		{"timer slack number", src(`[daemon]`, `timer_slack = 1000`), "daemon.timer_slack", 2, 1, `duration`},
		{"mcp max zero", src(`[daemon]`, `mcp_max_sessions = 0`), "daemon.mcp_max_sessions", 2, 1, `must be from 1 to 100000 (got 0)`},
		{"mcp max string", src(`[daemon]`, `mcp_max_sessions = "9"`), "daemon.mcp_max_sessions", 2, 1, `integer`},
		{"dotted key", src(`daemon.log_level = "x"`), "daemon.log_level", 1, 1, "must be one of"},
		{"inline table", src(`daemon = { log_format = "x" }`), "daemon.log_format", 1, 12, "must be one of"},
	})
	runOKCases(t, map[string]string{
		"listen ipv4":       src(`[daemon]`, `listen = "127.0.0.1:7457"`),
		"mcp idle and max":  src(`[daemon]`, `mcp_session_idle = "2s"`, `mcp_max_sessions = 100000`),
		"api timeouts":      src(`[daemon]`, `read_timeout = "1s"`, `idle_timeout = "1h"`, `write_timeout = "5s"`),
		"listen 127/8":      src(`[daemon]`, `listen = "127.1.2.3:1"`),
		"timer slack 1us":   src(`[daemon]`, `timer_slack = "1us"`),
		"timer slack 10ms":  src(`[daemon]`, `timer_slack = "10ms"`),
		"listen ipv6":       src(`[daemon]`, `listen = "[::1]:65535"`),
		"listen localhost":  src(`[daemon]`, `listen = "localhost:7457"`),
		"socket_mode 0777":  src(`[daemon]`, `socket_mode = "0777"`),
		"socket_mode 0600":  src(`[daemon]`, `socket_mode = "600"`),
		"log_level warn":    src(`[daemon]`, `log_level = "warn"`),
		"empty means unset": src(`[daemon]`, `state_dir = ""`, `socket = ""`, `socket_mode = ""`, `log_level = ""`),
	})
}

func TestSocketPathLimit(t *testing.T) {
	limit := safesocket.MaxPathLen()
	path := func(n int) string { // an absolute path of exactly n bytes
		return "/" + strings.Repeat("s", n-1)
	}
	mustDecode(t, src(`[daemon]`, fmt.Sprintf(`socket = %q`, path(limit))))
	runErrCases(t, []errCase{{
		"one over", src(`[daemon]`, fmt.Sprintf(`socket = %q`, path(limit+1))), "daemon.socket", 2, 1,
		fmt.Sprintf("is %d bytes long; a Unix socket path on ", limit+1),
	}})
	es := decodeErrors(t, src(`[daemon]`, fmt.Sprintf(`socket = %q`, path(limit+1))))
	if !strings.Contains(es[0].Msg, fmt.Sprintf("is at most %d", limit)) {
		t.Errorf("message does not give the limit: %s", es[0].Msg)
	}

	// A default socket too long (a deep state_dir, no runtime directory) is
	// reported at [daemon], where the socket key would go, or else without
	// a position.
	env := envWith(1000, map[string]string{"HOME": "/home/u"})
	_, err := decode([]byte(src(`[daemon]`, fmt.Sprintf(`state_dir = %q`, path(limit)))), "f.toml", env)
	if es, ok := err.(Errors); !ok || len(es) != 1 || es[0].Key != "daemon.socket" || es[0].Line != 1 || !strings.Contains(es[0].Msg, "the default") {
		t.Errorf("long default socket: %v", err)
	}
	env = envWith(1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": path(limit)})
	_, err = decode(nil, "f.toml", env)
	if es, ok := err.(Errors); !ok || len(es) != 1 || es[0].Key != "daemon.socket" || es[0].Line != 0 || es[0].Error() != "f.toml: "+es[0].Key+": "+es[0].Msg {
		t.Errorf("long default socket: %v", err)
	}
}

func TestValidateAgents(t *testing.T) {
	twoAgents := func(second ...string) string {
		return src(append([]string{`[[agent]]`, `name = "first"`, ``, `[[agent]]`}, second...)...)
	}
	runErrCases(t, []errCase{
		{"name missing", src(`[daemon]`, ``, `[[agent]]`, `workdir = "/w"`), "agent[0].name", 3, 3, "is required"},
		{"bad name in second agent", twoAgents(`workdir = "/w"`, `  name = "Bad Name"`), "agent[1].name", 6, 3, `(got "Bad Name")`},
		{"name with dot", twoAgents(`name = "a.b"`), "agent[1].name", 5, 1, "lowercase letters"},
		{"name starting with -", twoAgents(`name = "-a"`), "agent[1].name", 5, 1, "starting with a letter or digit"},
		{"name 64 chars", twoAgents(`name = "` + strings.Repeat("a", 64) + `"`), "agent[1].name", 5, 1, "1 to 63"},
		{"duplicate name", twoAgents(`name = "first"`), "agent[1].name", 5, 1, `agent[0].name has this name already (at 2:1) (got "first")`},
		{"relative workdir", twoAgents(`name = "b"`, `workdir = "src/b"`), "agent[1].workdir", 6, 1, "must be an absolute path"},
		{"no upstreams", twoAgents(`name = "b"`, `upstreams = []`), "agent[1].upstreams", 6, 1, "at least one upstream"},
		{"unknown upstream", src(`[[agent]]`, `name = "a"`, `upstreams = ["local", "foo"]`, `[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`),
			"agent[0].upstreams[1]", 3, 23, `unknown upstream "foo"; declared: local, qday`},
		{"upstream twice", src(`[[agent]]`, `name = "a"`, `upstreams = ["local", "local"]`), "agent[0].upstreams[1]", 3, 23, "twice"},
		{"empty agent array", src(`agent = []`), "agent", 1, 1, "at least one agent"},
		{"inline agents", src(`agent = [{ name = "a" }, { name = "A" }]`), "agent[1].name", 1, 28, "lowercase"},
		{"unknown transcript", twoAgents(`name = "b"`, `transcript = "claude"`), "agent[1].transcript", 6, 1,
			`must be one of auto, claude-code, codex, off (got "claude")`},
		{"transcript not a string", twoAgents(`name = "b"`, `transcript = false`), "agent[1].transcript", 6, 1, "must be a string"},
	})
	for _, v := range []string{"", TranscriptAuto, TranscriptClaudeCode, TranscriptCodex, TranscriptOff} {
		want := v
		if v == "" {
			want = TranscriptAuto // left out or "": the default
		}
		if got := mustDecode(t, twoAgents(`name = "b"`, `transcript = "`+v+`"`)).Agents[1].Transcript; got != want {
			t.Errorf("transcript = %q decodes to %q, want %q", v, got, want)
		}
	}
	runOKCases(t, map[string]string{
		"name 63 chars":     src(`[[agent]]`, `name = "`+strings.Repeat("a", 63)+`"`),
		"name 1 char":       src(`[[agent]]`, `name = "0"`),
		"name with - and _": src(`[[agent]]`, `name = "a-b_c"`),
		"no workdir":        src(`[[agent]]`, `name = "a"`, `workdir = ""`),
	})
}

// TestValidateAgentUsersAndGroups: names resolve on this machine (root
// and its group exist everywhere this runs), numbers are taken as ids,
// and an unknown name, an empty entry or one named twice is refused at
// its place.
func TestValidateAgentUsersAndGroups(t *testing.T) {
	runErrCases(t, []errCase{
		{"unknown user", src(`[[agent]]`, `name = "a"`, `users = ["root", "no-such-user-xq7"]`), "agent[0].users[1]", 3, 18, `names no user on this machine (got "no-such-user-xq7")`},
		{"unknown group", src(`[[agent]]`, `name = "a"`, `groups = ["no-such-group-xq7"]`), "agent[0].groups[0]", 3, 11, "names no group on this machine"},
		{"empty user", src(`[[agent]]`, `name = "a"`, `users = [""]`), "agent[0].users[0]", 3, 10, "must not be empty"},
		{"user twice", src(`[[agent]]`, `name = "a"`, `users = ["1001", "1001"]`), "agent[0].users[1]", 3, 18, "is named twice"},
		{"not strings", src(`[[agent]]`, `name = "a"`, `users = [1001]`), "agent[0].users[0]", 3, 10, "a string"},
	})
	c := mustDecode(t, src(`[[agent]]`, `name = "a"`, `users = ["root", "1001"]`, `groups = ["0", "40001"]`))
	if a := c.Agents[0]; !slices.Equal(a.UIDs, []uint32{0, 1001}) || !slices.Equal(a.GIDs, []uint32{0, 40001}) {
		t.Errorf("resolved ids: users %v groups %v", a.UIDs, a.GIDs)
	}
}

func TestValidateUpstreams(t *testing.T) {
	qday := func(lines ...string) string {
		return src(append([]string{`[[agent]]`, `name = "a"`, ``, `[upstream.qday]`}, lines...)...)
	}
	runErrCases(t, []errCase{
		{"kind required", src(`[upstream.main]`, `url = "https://x.example"`), "upstream.main.kind", 1, 2, "is required: qday, delx, local or nats"},
		{"kind unknown", qday(`kind = "ftp"`), "upstream.qday.kind", 5, 1, `must be one of qday, delx, local, nats (got "ftp")`},
		{"local of another kind", src(`[upstream.local]`, `kind = "qday"`), "upstream.local.kind", 2, 1, `must be of kind "local"`},
		{"bad upstream name", src(`[upstream.Main]`, `kind = "local"`), "upstream.Main", 1, 2, "lowercase"},
		{"url missing", qday(`token_env = "T"`), "upstream.qday.url", 4, 2, `is required for kind "qday"`},
		{"url scheme", qday(`token_env = "T"`, `url = "ftp://x.example"`), "upstream.qday.url", 6, 1, "https://"},
		{"url no scheme", qday(`token_env = "T"`, `url = "x.example/api"`), "upstream.qday.url", 6, 1, "https://"},
		{"url no host", qday(`token_env = "T"`, `url = "https:///api"`), "upstream.qday.url", 6, 1, "must name a host"},
		{"url plain http", qday(`token_env = "T"`, `url = "http://x.example"`), "upstream.qday.url", 6, 1, "loopback"},
		{"url query", qday(`token_env = "T"`, `url = "https://x.example/?key=1"`), "upstream.qday.url", 6, 1, "no query"},
		{"url credentials", qday(`token_env = "T"`, `  url = "https://me:pw@x.example"`), "upstream.qday.url", 6, 3,
			"credentials in the url are not allowed; use token_env or token_file"},
		{"no token", qday(`url = "https://x.example"`), "upstream.qday.token_env", 4, 2, "needs token_env"},
		{"two tokens", qday(`url = "https://x.example"`, `token_env = "T"`, `token_file = "/t"`), "upstream.qday.token_file", 7, 1, "not both"},
		{"token_env not a name", qday(`url = "https://x.example"`, `token_env = "sk-123"`), "upstream.qday.token_env", 6, 1, "not the token itself"},
		{"token_file relative", qday(`url = "https://x.example"`, `token_file = "qday.token"`), "upstream.qday.token_file", 6, 1, "absolute"},
		{"local with url", src(`[upstream.local]`, `url = "https://x.example"`), "upstream.local.url", 2, 1, "takes no url"},
		{"local with token", src(`[upstream.local]`, `token_env = "T"`), "upstream.local.token_env", 2, 1, "takes no token"},
		{"rate zero", qday(`url = "https://x.example"`, `token_env = "T"`, `rate = 0`), "upstream.qday.rate", 7, 1, "above zero (got 0)"},
		{"rate negative", qday(`url = "https://x.example"`, `token_env = "T"`, `rate = -1.5`), "upstream.qday.rate", 7, 1, "(got -1.5)"},
		{"rate nan", qday(`url = "https://x.example"`, `token_env = "T"`, `rate = nan`), "upstream.qday.rate", 7, 1, "above zero"},
		{"rate inf", qday(`url = "https://x.example"`, `token_env = "T"`, `rate = inf`), "upstream.qday.rate", 7, 1, "above zero"},
		{"burst zero", qday(`url = "https://x.example"`, `token_env = "T"`, `burst = 0`), "upstream.qday.burst", 7, 1, "at least 1 (got 0)"},
		{"timeout zero", qday(`url = "https://x.example"`, `token_env = "T"`, `timeout = "0ms"`), "upstream.qday.timeout", 7, 1, "more than zero"},
		{"dotted upstream key", src(`upstream.qday.url = "https://x.example"`, `upstream.qday.token_env = "T"`, `upstream.qday.burst = -3`), "upstream.qday.burst", 3, 1, "at least 1"},
	})
	runOKCases(t, map[string]string{
		"rate tiny":          qday(`url = "https://x.example"`, `token_env = "T"`, `rate = 1e-9`),
		"rate integer":       qday(`url = "https://x.example"`, `token_env = "T"`, `rate = 3`),
		"burst 1":            qday(`url = "https://x.example"`, `token_env = "T"`, `burst = 1`),
		"http loopback":      qday(`url = "http://127.0.0.1:9000/api"`, `token_env = "T"`),
		"http localhost":     qday(`url = "http://localhost:9000"`, `token_env = "T"`),
		"token_file":         qday(`url = "https://x.example"`, `token_file = "/etc/continuityd/qday.token"`),
		"local declared":     src(`[upstream.local]`),
		"unused upstream ok": src(`[upstream.archive]`, `kind = "local"`),
	})
}

// A value that may be a credential is never repeated in an error.
func TestErrorsDoNotEchoSecrets(t *testing.T) {
	for _, doc := range []string{
		src(`[upstream.qday]`, `url = "https://me:SECRET@x.example"`, `token_env = "T"`),
		src(`[upstream.qday]`, `url = "ftp://SECRET"`, `token_env = "T"`),
		src(`[upstream.qday]`, `url = "https://x.example/?k=SECRET"`, `token_env = "T"`),
		src(`[upstream.qday]`, `url = "http://SECRET.example"`, `token_env = "T"`),
		src(`[upstream.qday]`, `url = "https://x.example"`, `token_env = "sk-SECRET"`),
		src(`[upstream.qday]`, `url = "https://x.example"`, `token_file = "SECRET"`),
		src(`[upstream.qday]`, `url = 5`, `token_file = "SECRET"`),
		src(`[upstream.qday]`, `url = "SECRET"`, `token_env = "T"`),
		src(`[upstream.qday]`, `url = "https://x.example"`, `token_file = "~SECRET"`),
	} {
		es := decodeErrors(t, doc)
		if strings.Contains(es.Error(), "SECRET") {
			t.Errorf("error repeats the secret:\n%v", es)
		}
	}
}

func TestValidateGuard(t *testing.T) {
	runErrCases(t, []errCase{
		{"scheme", src(`[guard]`, `allowed_link_domains = ["example.com", "https://x.com"]`), "guard.allowed_link_domains[1]", 2, 40, `bare lowercase domain name such as "example.com" (no scheme, port, path or wildcard) (got "https://x.com")`},
		{"upper case", src(`[guard]`, `allowed_link_domains = ["X.com"]`), "guard.allowed_link_domains[0]", 2, 25, "lowercase"},
		{"single label", src(`[guard]`, `allowed_link_domains = ["localhost"]`), "guard.allowed_link_domains[0]", 2, 25, "domain"},
		{"wildcard", src(`[guard]`, `allowed_link_domains = ["*.x.com"]`), "guard.allowed_link_domains[0]", 2, 25, "wildcard"},
		{"ip", src(`[guard]`, `allowed_link_domains = ["1.2.3.4"]`), "guard.allowed_link_domains[0]", 2, 25, "domain"},
		{"trailing dot", src(`[guard]`, `allowed_link_domains = ["x.com."]`), "guard.allowed_link_domains[0]", 2, 25, "domain"},
		{"port", src(`[guard]`, `allowed_link_domains = ["x.com:443"]`), "guard.allowed_link_domains[0]", 2, 25, "domain"},
		{"twice", src(`[guard]`, `allowed_link_domains = [`, `  "x.com",`, `  "x.com",`, `]`), "guard.allowed_link_domains[1]", 4, 3, "listed twice"},
	})
	c := mustDecode(t, src(`[guard]`, `allowed_link_domains = ["xn--bcher-kva.example", "a-b.co.uk"]`))
	if len(c.Guard.AllowedLinkDomains) != 2 {
		t.Errorf("domains = %v", c.Guard.AllowedLinkDomains)
	}
}

// Every problem is reported in one round, in file order.
func TestAllErrorsAtOnce(t *testing.T) {
	doc := src(
		`[daemon]`,
		`log_level = "loud"`,
		`log_formt = "text"`,
		``,
		`[[agent]]`,
		`name = "ok"`,
		``,
		`[[agent]]`,
		`name = "Not OK"`,
		`upstreams = ["qday", "nope"]`,
		``,
		`[upstream.qday]`,
		`url = "http://x.example"`,
		`rate = 0`,
		`burst = 0`,
		`timeout = "-1s"`,
	)
	es := decodeErrors(t, doc)
	want := []string{
		`f.toml:2:1: daemon.log_level: must be one of debug, info, warn, error (got "loud")`,
		`f.toml:3:1: daemon.log_formt: unknown key; did you mean "log_format"?`,
		`f.toml:9:1: agent[1].name: must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit (it names a directory) (got "Not OK")`,
		`f.toml:10:22: agent[1].upstreams[1]: unknown upstream "nope"; declared: local, qday`,
		`f.toml:12:2: upstream.qday.token_env: kind "qday" needs token_env (an environment variable) or token_file (a file) holding its token`,
		`f.toml:13:1: upstream.qday.url: plain http:// is allowed only to a loopback address; use https://`,
		`f.toml:14:1: upstream.qday.rate: must be a number of requests per second above zero (got 0)`,
		`f.toml:15:1: upstream.qday.burst: must be at least 1 (got 0)`,
		`f.toml:16:1: upstream.qday.timeout: must not be negative (got "-1s")`,
	}
	if got := strings.Split(es.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", es.Error(), strings.Join(want, "\n"))
	}
}

func TestTimerSlackValues(t *testing.T) {
	for give, want := range map[string]time.Duration{`"50us"`: 50 * time.Microsecond, `"250us"`: 250 * time.Microsecond, `"10ms"`: 10 * time.Millisecond} {
		if got := mustDecode(t, src(`[daemon]`, `timer_slack = `+give)).Daemon.TimerSlack.Duration; got != want {
			t.Errorf("timer_slack = %s: got %v, want %v", give, got, want)
		}
	}
}
