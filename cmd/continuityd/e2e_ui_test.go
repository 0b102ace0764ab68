//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon"
)

// askTCPEnv makes this test binary an HTTP client of the loopback address
// the variable names (TestMain's children), for a test that asks as
// another user: one request (as http.Request.Write writes it) on stdin,
// the answer on stdout.
const askTCPEnv = "CONTINUITYD_TEST_ASK_TCP"

func init() { children[askTCPEnv] = askTCPMain }

func askTCPMain() int {
	req, err := http.ReadRequest(bufio.NewReader(os.Stdin))
	if err == nil {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", os.Getenv(askTCPEnv), 30*time.Second); err == nil {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if err = req.Write(c); err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(c), req); err == nil {
					err = resp.Write(os.Stdout)
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// uiLoginURL asks the daemon on socket for a one-time login URL, as
// `continuityd ui --print` does (as cred's user, nil: this process's).
func uiLoginURL(t *testing.T, socket string, cred *syscall.Credential) string {
	t.Helper()
	var code int
	var out, errs string
	if cred != nil {
		code, out, errs = runAs(t, cred, nil, "", "ui", "--print", "--socket", socket)
	} else {
		cmd := exec.Command(binary, "ui", "--print", "--socket", socket)
		cmd.Env = append(os.Environ(), "DISPLAY=", "WAYLAND_DISPLAY=")
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("continuityd ui --print: %v", err)
		}
		out = string(b)
	}
	u := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/ui/login\?t=[A-Za-z0-9_-]{43}$`).MatchString(u) {
		t.Fatalf("continuityd ui --print: exit %d, %q %s", code, out, errs)
	}
	return u
}

// uiAnswer is one answer of the page.
type uiAnswer struct {
	status int
	header http.Header
	body   string
}

// uiDo sends one request to the page at base (http://127.0.0.1:PORT) and
// never follows a redirect.
func uiDo(t *testing.T, method, base, path string, header map[string]string, form url.Values) uiAnswer {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return uiAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// uiSession opens the login URL: the session's cookie ("name=value").
func uiSession(t *testing.T, login string) (base, cookie string) {
	t.Helper()
	u, _ := url.Parse(login)
	base = "http://" + u.Host
	a := uiDo(t, "GET", base, u.RequestURI(), nil, nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d %v %s", a.status, a.header, a.body)
	}
	sc := a.header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("the session cookie %q lacks %s", sc, want)
		}
	}
	cookie, _, _ = strings.Cut(sc, ";")
	return base, cookie
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([A-Za-z0-9_-]+)"`)

// TestUIDoorRefuses runs the daemon and asks its web page, over real
// loopback, what an attacker would: a one-time URL used twice, a wrong
// Host (DNS rebinding), a foreign Origin, no cookie, a change without
// the CSRF token or from another origin, a revoked session. Each is
// refused and the file the change names stays as it was; the same change
// with the token from the page itself goes through (the test can fail).
func TestUIDoorRefuses(t *testing.T) {
	w := newWorkspace(t)
	file := filepath.Join(w.dir, "work", "a.txt")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	var start string
	waitUntil(t, func() string { return "no start snapshot" }, func() bool {
		snaps, _ := get(t, c, "/v1/snapshots?agent=builder")["snapshots"].([]any)
		if len(snaps) > 0 {
			start, _ = snaps[0].(map[string]any)["id"].(string)
		}
		return start != ""
	})
	if err := os.WriteFile(file, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	login := uiLoginURL(t, w.socket, nil)
	base, cookie := uiSession(t, login)
	u, _ := url.Parse(base)
	port := u.Port()
	if a := uiDo(t, "GET", base, "/ui/login?t="+strings.SplitN(login, "t=", 2)[1], nil, nil); a.status != http.StatusUnauthorized {
		t.Errorf("a login URL used a second time: %d %s, want 401", a.status, a.body)
	}
	ok := uiDo(t, "GET", base, "/ui/", map[string]string{"Cookie": cookie}, nil)
	if ok.status != 200 || !strings.Contains(ok.body, `data-place="builder"`) {
		t.Fatalf("the places with the session: %d %s", ok.status, ok.body)
	}
	for k, want := range map[string]string{"Content-Security-Policy": "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
		if !strings.Contains(ok.header.Get(k), want) {
			t.Errorf("%s: %q, want %q in it", k, ok.header.Get(k), want)
		}
	}
	if strings.Contains(ok.header.Get("Content-Security-Policy"), "unsafe-inline") || strings.Contains(ok.body, "<script>") || strings.Contains(ok.body, "style=") {
		t.Errorf("inline script or style on the page: CSP %q", ok.header.Get("Content-Security-Policy"))
	}
	tok, _ := os.ReadFile(filepath.Join(w.state, "api.token"))
	if m := csrfRe.FindStringSubmatch(ok.body); m == nil {
		t.Fatalf("no CSRF token on the page: %s", ok.body)
	} else if strings.Contains(ok.body, strings.Split(cookie, "=")[1]) || (len(tok) > 0 && strings.Contains(ok.body, strings.TrimSpace(string(tok)))) {
		t.Errorf("the page carries the session's cookie or the API token")
	}
	csrf := csrfRe.FindStringSubmatch(ok.body)[1]
	restore := url.Values{"snapshot": {start}, "path": {"a.txt"}}
	withCSRF := url.Values{"snapshot": {start}, "path": {"a.txt"}, "csrf": {csrf}}
	origin := "http://127.0.0.1:" + port

	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		form               url.Values
		status             int
		code               string
	}{
		{"wrong Host", "GET", "/ui/", map[string]string{"Cookie": cookie, "Host": "rebound.example:" + port}, nil, 403, "FORBIDDEN_HOST"},
		{"wrong port in Host", "GET", "/ui/", map[string]string{"Cookie": cookie, "Host": "127.0.0.1:1"}, nil, 403, "FORBIDDEN_HOST"},
		{"foreign Origin", "GET", "/ui/", map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, nil, 403, "FORBIDDEN_ORIGIN"},
		{"null Origin", "GET", "/ui/", map[string]string{"Cookie": cookie, "Origin": "null"}, nil, 403, "FORBIDDEN_ORIGIN"},
		{"another site's fetch", "GET", "/ui/", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site"}, nil, 403, "FORBIDDEN_ORIGIN"},
		{"no cookie", "GET", "/ui/", nil, nil, 401, "UNAUTHORIZED"},
		{"a made-up cookie", "GET", "/ui/", map[string]string{"Cookie": "continuityd_ui_" + port + "=forged"}, nil, 401, "UNAUTHORIZED"},
		{"the live stream without a cookie", "GET", "/ui/events", nil, nil, 401, "UNAUTHORIZED"},
		{"POST without CSRF", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": origin}, restore, 403, "CSRF_REQUIRED"},
		{"POST with a wrong CSRF", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": origin},
			url.Values{"snapshot": {start}, "path": {"a.txt"}, "csrf": {"x" + csrf}}, 403, "CSRF_REQUIRED"},
		{"POST from a foreign Origin", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, withCSRF, 403, "FORBIDDEN_ORIGIN"},
		{"POST from a null Origin another site starts", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": "null", "Sec-Fetch-Site": "cross-site"}, withCSRF, 403, "FORBIDDEN_ORIGIN"},
		{"POST from a null Origin, no fetch metadata", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": "null"}, withCSRF, 403, "FORBIDDEN_ORIGIN"},
		{"POST without Origin", "POST", "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie}, withCSRF, 403, "FORBIDDEN_ORIGIN"},
		{"POST without a cookie", "POST", "/ui/a/builder/file/restore", map[string]string{"Origin": origin}, withCSRF, 401, "UNAUTHORIZED"},
	} {
		a := uiDo(t, c.method, base, c.path, c.header, c.form)
		if a.status != c.status || !strings.Contains(a.body, c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.name, a.status, a.body, c.status, c.code)
		}
		if strings.Contains(a.body, csrf) || strings.Contains(a.body, strings.Split(cookie, "=")[1]) {
			t.Errorf("%s: the refusal carries the session's secrets: %s", c.name, a.body)
		}
		if b, _ := os.ReadFile(file); string(b) != "two\n" {
			t.Fatalf("%s changed a.txt to %q", c.name, b)
		}
	}

	// The same change from the page itself goes through.
	a := uiDo(t, "POST", base, "/ui/a/builder/file/restore", map[string]string{"Cookie": cookie, "Origin": origin}, withCSRF)
	if a.status != 200 || !strings.Contains(a.body, `id="undo"`) {
		t.Fatalf("the restore from the page: %d %s", a.status, a.body)
	}
	if b, _ := os.ReadFile(file); string(b) != "one\n" {
		t.Fatalf("after the page's restore a.txt is %q, want one", b)
	}

	// Revoked: the cookie opens nothing any more, nor does an unused URL.
	unused := uiLoginURL(t, w.socket, nil)
	out, err := exec.Command(binary, "ui", "--revoke", "--socket", w.socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ended 1 web page sessions (every user's)") {
		t.Fatalf("continuityd ui --revoke: %v %s", err, out)
	}
	if a := uiDo(t, "GET", base, "/ui/", map[string]string{"Cookie": cookie}, nil); a.status != 401 {
		t.Errorf("a revoked session: %d %s, want 401", a.status, a.body)
	}
	uu, _ := url.Parse(unused)
	if a := uiDo(t, "GET", base, uu.RequestURI(), nil, nil); a.status != 401 {
		t.Errorf("a login URL made before the revocation: %d %s, want 401", a.status, a.body)
	}
	st := get(t, c, "/v1/status")
	if ui, _ := st["ui"].(map[string]any); ui["url"] != base+"/ui/" || ui["own_listener"] != true {
		t.Errorf("status names the page as %v, want %s/ui/ on its own listener", st["ui"], base)
	}
}

// TestUISessionExpires: a session (made short by the test hook) works,
// then ends by itself.
func TestUISessionExpires(t *testing.T) {
	w := newWorkspace(t)
	startProc(t, w.socket, []string{daemon.SessionTTLEnv + "=3s"}, "run", "--config", w.config)
	base, cookie := uiSession(t, uiLoginURL(t, w.socket, nil))
	if a := uiDo(t, "GET", base, "/ui/", map[string]string{"Cookie": cookie}, nil); a.status != 200 {
		t.Fatalf("a fresh session: %d %s", a.status, a.body)
	}
	var last uiAnswer
	waitUntil(t, func() string { return fmt.Sprintf("the session still answers %d after its 3 s", last.status) }, func() bool {
		last = uiDo(t, "GET", base, "/ui/", map[string]string{"Cookie": cookie}, nil)
		return last.status == http.StatusUnauthorized
	})
}

// TestUIAnotherUsersCookie: a session is its user's. The daemon runs as
// root and root asks for the page; a process of another user holding
// root's cookie, or root's unused login URL, is refused (the kernel says
// whose the connection is), and the session still works for root.
func TestUIAnotherUsersCookie(t *testing.T) {
	top := usersTop(t, "cdui")
	helper := helperBinary(t, top)
	w := newWorkspace(t)
	startProc(t, w.socket, nil, "run", "--config", w.config)
	base, cookie := uiSession(t, uiLoginURL(t, w.socket, nil))
	u, _ := url.Parse(base)
	askTCP := func(req *http.Request) (int, string) {
		t.Helper()
		resp, body := askTCPAs(t, helper, asOutsider, u.Host, req)
		return resp.StatusCode, body
	}
	req, _ := http.NewRequest("GET", base+"/ui/", nil)
	req.Header.Set("Cookie", cookie)
	if status, body := askTCP(req); status != 403 || !strings.Contains(body, "FORBIDDEN_PEER") || strings.Contains(body, "builder") {
		t.Errorf("root's cookie from uid %d: %d %s, want 403 FORBIDDEN_PEER", outsiderID, status, body)
	}
	login, _ := url.Parse(uiLoginURL(t, w.socket, nil))
	req, _ = http.NewRequest("GET", base+login.RequestURI(), nil)
	if status, body := askTCP(req); status != 403 || !strings.Contains(body, "FORBIDDEN_PEER") {
		t.Errorf("root's login URL opened by uid %d: %d %s, want 403 FORBIDDEN_PEER", outsiderID, status, body)
	}
	if a := uiDo(t, "GET", base, login.RequestURI(), nil, nil); a.status != http.StatusSeeOther {
		t.Errorf("root's login URL, refused to another user, then opened by root: %d %s", a.status, a.body)
	}
	if a := uiDo(t, "GET", base, "/ui/", map[string]string{"Cookie": cookie}, nil); a.status != 200 {
		t.Errorf("root's own session after the other user's tries: %d %s", a.status, a.body)
	}
}

// askTCPAs sends req to the loopback address hostport from a process of
// cred (helper, askTCPEnv) and returns the answer with its body read.
func askTCPAs(t *testing.T, helper string, cred *syscall.Credential, hostport string, req *http.Request) (*http.Response, string) {
	t.Helper()
	var in, out, errb strings.Builder
	if err := req.Write(&in); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper)
	cmd.Env = append(os.Environ(), askTCPEnv+"="+hostport)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(in.String()), &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s as uid %d: %v %s", req.Method, req.URL, cred.Uid, err, errb.String())
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out.String())), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestUIPerAgentAccess: the page shows a user what the socket serves it.
// The daemon runs as its own user with a socket its group shares; the
// member asks for the page over the socket and opens it from its own
// process: it sees ours, not theirs, and a view of theirs is refused with
// the socket's AGENT_FORBIDDEN; its --revoke ends its own session only.
func TestUIPerAgentAccess(t *testing.T) {
	top, _, socket, cfgPath := accessWorkspace(t, "cduiaccess")
	helper := helperBinary(t, top)
	startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	login, err := url.Parse(uiLoginURL(t, socket, asMember))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(path, cookie string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+login.Host+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		return askTCPAs(t, helper, asMember, login.Host, req)
	}
	resp, body := ask(login.RequestURI(), "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the member opens its login URL: %d %s", resp.StatusCode, body)
	}
	cookie, _, _ := strings.Cut(resp.Header.Get("Set-Cookie"), ";")
	resp, body = ask("/ui/", cookie)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-place="ours"`) || strings.Contains(body, "theirs") {
		t.Errorf("the member's places: %d %s, want ours and not theirs", resp.StatusCode, body)
	}
	for _, path := range []string{"/ui/a/theirs/", "/ui/a/theirs/lost", "/ui/a/theirs/s/latest"} {
		resp, body = ask(path, cookie)
		if resp.StatusCode != 403 || !strings.Contains(body, "AGENT_FORBIDDEN") {
			t.Errorf("the member's %s: %d %s, want 403 AGENT_FORBIDDEN", path, resp.StatusCode, body)
		}
	}
	if resp, body = ask("/ui/a/ours/", cookie); resp.StatusCode != 200 {
		t.Errorf("the member's timeline of ours: %d %s", resp.StatusCode, body)
	}
	code, out, errs := runAs(t, asMember, nil, "", "ui", "--revoke", "--socket", socket)
	if code != 0 || !strings.Contains(out, "ended 1 web page sessions (yours)") {
		t.Errorf("the member's ui --revoke: %d %s %s", code, out, errs)
	}
	if resp, body = ask("/ui/", cookie); resp.StatusCode != 401 {
		t.Errorf("the member's revoked session: %d %s", resp.StatusCode, body)
	}
}
