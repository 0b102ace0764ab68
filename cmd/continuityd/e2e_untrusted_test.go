//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests put untrusted files where others can write (the spool, the
// workdir, the state directory's token) and run the real daemon on them.
// Linux only: the memory bound is read from /proc.

// peakRSS is the daemon's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// memoryBound is far below the 3 GB files these tests plant, and far above
// what the daemon needs.
const memoryBound = 500 << 20

// sparse makes a 3 GB file that costs no disk.
func sparse(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 3<<30); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolFIFOAndDevZeroAreRefused: a FIFO, a link to /dev/zero and an
// oversized file in the spool (which the socket's group may write in a
// shared setup) are set aside unread with a log line naming each; the
// daemon starts, stores the real spooled event, answers, and stops on
// SIGTERM.
func TestSpoolFIFOAndDevZeroAreRefused(t *testing.T) {
	w := newWorkspace(t)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	pre := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"` + filepath.Join(w.dir, "work") + `","hook_event_name":"PreCompact","trigger":"auto"}`
	if code, _, errs := cli(t, env, pre, "hook"); code != 0 {
		t.Fatalf("hook: %d %s", code, errs)
	}
	spool := filepath.Join(w.state, "spool")
	// Named to sort before the real event: each must be passed over, not
	// waited on, for the real one to be stored.
	fifo, zero, big := "00000000000000000001-fifo.json", "00000000000000000002-zero.json", "00000000000000000003-big.json"
	if err := syscall.Mkfifo(filepath.Join(spool, fifo), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(spool, zero)); err != nil {
		t.Fatal(err)
	}
	sparse(t, filepath.Join(spool, big))

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	// The spool is stored once the daemon answers.
	n := 0.0
	waitUntil(t, func() string { return fmt.Sprintf("the real spooled event was not stored: compactions %v", n) }, func() bool {
		n = get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)["compactions"].(float64)
		return n == 1
	})
	c.CloseIdleConnections()
	if rss := peakRSS(t, p); rss > memoryBound {
		t.Errorf("peak RSS %d MB reading the spool", rss>>20)
	}
	log := p.stderr.String()
	for name, says := range map[string]string{fifo: "FIFO", zero: "symbolic link", big: "over the limit"} {
		if !strings.Contains(log, "file="+name) || !strings.Contains(log, says) {
			t.Errorf("the log does not name %s (%s):\n%s", name, says, log)
		}
		// Set aside for an operator, as it was: renamed, never opened.
		fi, err := os.Lstat(filepath.Join(spool, "failed", name))
		if err != nil {
			t.Errorf("%s not moved to spool/failed: %v", name, err)
		} else if name == fifo && fi.Mode()&os.ModeNamedPipe == 0 || name == zero && fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s changed on the way: %v", name, fi.Mode())
		}
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM: %s", code, p.stderr)
	}
}

// refusal is the refusal resume shows for a handoff file, or nil.
func refusal(t *testing.T, c *http.Client, source string) map[string]any {
	t.Helper()
	rs, _ := get(t, c, "/v1/continuity?peek=1")["refused"].([]any)
	for _, r := range rs {
		if m := r.(map[string]any); m["source"] == source {
			return m["error"].(map[string]any)
		}
	}
	return nil
}

// TestHandoffLinksAreNotFollowedOutOrReadWhole: the workdir may hold a
// cloned repository, whose HANDOFF.md can be a link. A link to a 3 GB file
// is refused without being read (the daemon's memory stays small); a link
// leading out of the workdir is refused, not followed; both are shown
// under refused and logged.
func TestHandoffLinksAreNotFollowedOutOrReadWhole(t *testing.T) {
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	sparse(t, filepath.Join(work, "big.bin"))
	if err := os.Symlink("big.bin", filepath.Join(work, "HANDOFF.md")); err != nil {
		t.Fatal(err)
	}
	// Outside the workdir, files the daemon would accept if it went there.
	outside := filepath.Join(w.dir, "outside")
	os.MkdirAll(outside, 0o700)
	os.WriteFile(filepath.Join(outside, "capsule.json"), []byte(`{"version":"1","goal":"read from outside the workdir"}`), 0o600)
	os.WriteFile(filepath.Join(outside, "HANDOFF.md"), []byte("# Goal\nread from outside the workdir\n"), 0o600)
	os.MkdirAll(filepath.Join(work, ".continuity"), 0o700)
	if err := os.Symlink(filepath.Join(outside, "capsule.json"), filepath.Join(work, ".continuity", "capsule.json")); err != nil {
		t.Fatal(err)
	}

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	if rss := peakRSS(t, p); rss > memoryBound {
		t.Errorf("peak RSS %d MB after a HANDOFF.md linked to a 3 GB file", rss>>20)
	}
	if e := refusal(t, c, "HANDOFF.md"); e == nil || e["code"] != "BODY_TOO_LARGE" {
		t.Errorf("HANDOFF.md linked to a 3 GB file: refusal %v", e)
	}
	capsuleFile := filepath.Join(".continuity", "capsule.json")
	if e := refusal(t, c, capsuleFile); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "leads out of") {
		t.Errorf("capsule file linked out of the workdir: refusal %v", e)
	}

	// HANDOFF.md now leads out of the workdir: refused once seen.
	os.Remove(filepath.Join(work, "HANDOFF.md"))
	if err := os.Symlink(filepath.Join(outside, "HANDOFF.md"), filepath.Join(work, "HANDOFF.md")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := refusal(t, c, "HANDOFF.md")
		if e != nil && strings.Contains(fmt.Sprint(e["message"]), "leads out of") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HANDOFF.md linked out of the workdir: refusal %v\n%s", e, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	doc := get(t, c, "/v1/continuity?peek=1")
	if strings.Contains(fmt.Sprint(doc), "read from outside the workdir") {
		t.Errorf("a file outside the workdir was read: %v", doc)
	}
	log := p.stderr.String()
	if !strings.Contains(log, "handoff file refused") || !strings.Contains(log, "leads out of") || !strings.Contains(log, "over the limit") {
		t.Errorf("the refusals are not logged:\n%s", log)
	}
	if rss := peakRSS(t, p); rss > memoryBound {
		t.Errorf("peak RSS %d MB", rss>>20)
	}
}

// freeAddr is a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// listenWorkspace is a workspace whose daemon also listens on loopback TCP.
func listenWorkspace(t *testing.T) (*workspace, string) {
	w := newWorkspace(t)
	addr := freeAddr(t)
	cfg, err := os.ReadFile(w.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "[daemon]\n", fmt.Sprintf("[daemon]\nlisten = %q\n", addr), 1))
	if err := os.WriteFile(w.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return w, addr
}

// TestAPITokenFileMustBePrivate: an api.token that others may read, or
// that is a link (here to /etc/hostname, which would make the host name
// the token), is refused: the daemon does not start its loopback listener
// on it and says which file, what is wrong and what to do.
func TestAPITokenFileMustBePrivate(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(path string) error
		says  []string
	}{
		{"mode 0644", func(path string) error {
			if err := os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
				return err
			}
			return os.Chmod(path, 0o644)
		}, []string{"0644", "chmod 600"}},
		{"link to /etc/hostname", func(path string) error { return os.Symlink("/etc/hostname", path) },
			[]string{"symbolic link", "remove"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := listenWorkspace(t)
			os.MkdirAll(w.state, 0o700)
			path := filepath.Join(w.state, "api.token")
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			// Bounded so that a daemon that starts (the bug) fails the
			// test instead of hanging it.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "run", "--config", w.config)
			out, _ := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the daemon ran on the %s token:\n%s", c.name, out)
			}
			if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), path) {
				t.Fatalf("exit %d, want 1 with a message naming %s:\n%s", cmd.ProcessState.ExitCode(), path, out)
			}
			for _, s := range c.says {
				if !strings.Contains(string(out), s) {
					t.Errorf("the message does not say %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestLoopbackListenerRefusesDNSRebinding: a page whose host name was
// rebound to 127.0.0.1 sends its own name as Host and Origin; even with
// the right token (the token is the only other guard) it is refused, while
// a client naming the loopback address is served.
func TestLoopbackListenerRefusesDNSRebinding(t *testing.T) {
	w, addr := listenWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.terminate(t)
	raw, err := os.ReadFile(filepath.Join(w.state, "api.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(w.state, "api.token")); fi.Mode() != 0o600 {
		t.Fatalf("a new api.token has mode %v", fi.Mode())
	}
	_, port, _ := net.SplitHostPort(addr)
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	do := func(host, origin string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	for _, h := range []struct{ host, origin, code string }{
		{"evil.example:" + port, "http://evil.example:" + port, "FORBIDDEN_HOST"},
		{"evil.example:" + port, "", "FORBIDDEN_HOST"},
		{addr, "http://evil.example:" + port, "FORBIDDEN_ORIGIN"},
		{addr, "null", "FORBIDDEN_ORIGIN"},
	} {
		if status, body := do(h.host, h.origin); status != 403 || !strings.Contains(body, h.code) {
			t.Errorf("Host %s Origin %q: %d %s, want 403 %s", h.host, h.origin, status, body, h.code)
		}
	}
	for _, ok := range []struct{ host, origin string }{
		{addr, ""}, {"localhost:" + port, "http://localhost:" + port}, {addr, "http://" + addr},
	} {
		if status, body := do(ok.host, ok.origin); status != 200 {
			t.Errorf("Host %s Origin %q: %d %s, want 200", ok.host, ok.origin, status, body)
		}
	}
}
