package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// TestStatusTextShowsHealthAndRefusedReload: text `status` names the
// agent's workdir, how its watch, transcripts and snapshots are doing, and
// a reload refused for a typo in the config (which before was only in the
// log, while status looked healthy). Compared with a golden file
// (testdata/golden/status-health.txt; -update rewrites it) after the
// run's own values (pid, times, paths) are replaced by names.
func TestStatusTextShowsHealthAndRefusedReload(t *testing.T) {
	w := newWorkspace(t)
	work := filepath.Join(w.dir, "work")
	claude, codex := filepath.Join(w.dir, "claude"), filepath.Join(w.dir, "codex")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n"+
		"[transcripts]\nclaude_home = %q\ncodex_home = %q\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n",
		w.state, w.socket, claude, codex, work)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	// The start line names the workdir (it is logged once the socket
	// serves, so it may come a little after the first answer).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if log := p.stderr.String(); strings.Contains(log, "continuityd listening") {
			if !strings.Contains(log, "builder="+work) {
				t.Fatalf("the start line does not name the workdir:\n%s", log)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start line:\n%s", p.stderr)
		}
	}

	// A typo in a key: the reload is refused, the running config stays.
	typo := strings.Replace(cfg, "shutdown_timeout", "shutdown_timout", 1)
	if err := os.WriteFile(w.config, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)

	var out string
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, o, errs := cli(t, nil, "", "status", "--socket", w.socket)
		if code != exitOK {
			t.Fatalf("status: %d %s", code, errs)
		}
		out = o
		// Settled: the reload is known, the first snapshot is taken and
		// the transcripts are looked for.
		if strings.Contains(out, "last reload: refused") && strings.Contains(out, "snapshots    ok\n") &&
			strings.Contains(out, "no session yet") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the refused reload and settled components:\n%s\nlog:\n%s", out, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	golden(t, "status-health.txt", normalizeStatus(out, w.dir))
}

// normalizeStatus replaces what changes from run to run in text status.
func normalizeStatus(out, dir string) string {
	out = strings.ReplaceAll(out, transcript.EncodeClaudeProject(dir), "-DIR")
	out = strings.ReplaceAll(out, dir, "DIR")
	for _, r := range []struct{ re, with string }{
		{`continuityd \S+, pid \d+, up \S+`, "continuityd VERSION, pid PID, up UPTIME"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`, "TIME"},
		{`sessions/\d{4}/\d\d/\d\d`, "sessions/YYYY/MM/DD"},
		{`\d+(\.\d+)?(ms|s|m|h)+ ago`, "AGO"},
		{`inotify watches: \d+ in use of the system's \d+`, "inotify watches: N in use of the system's LIMIT"},
	} {
		out = regexp.MustCompile(r.re).ReplaceAllString(out, r.with)
	}
	return out
}

// TestTourCommandsSayTheyNeedAConfig: on the embedded default, the tour's
// deadletter retry/discard, recover --agent builder and delx register fail
// saying plainly that they need a config with a qday or delx upstream, and
// show the lines.
func TestTourCommandsSayTheyNeedAConfig(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cdneed")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "run", "continuityd.sock")
	env := []string{"CONTINUITYD_STATE_DIR=" + filepath.Join(dir, "state"), "CONTINUITYD_SOCKET=" + sock}
	startProcIn(t, dir, sock, env, "run")
	for _, c := range []struct {
		args []string
		kind string
	}{
		{[]string{"deadletter", "retry", "--upstream", "qday", "42"}, "qday"},
		{[]string{"deadletter", "discard", "--upstream", "qday", "--all"}, "qday"},
		{[]string{"recover", "--agent", "builder"}, "qday"},
		{[]string{"delx", "register", "--agent", "builder"}, "delx"},
		{[]string{"delx", "register"}, "delx"},
	} {
		code, _, errs := cli(t, env, "", c.args...)
		want := "needs a config with a " + c.kind + " upstream"
		if code == exitOK || !strings.Contains(errs, want) || !strings.Contains(errs, "[upstream."+c.kind+"]") ||
			!strings.Contains(errs, "docs/CONFIGURATION.md") {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %q with the config lines", c.args, code, errs, want)
		}
	}
}
