//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestDoctor runs `continuityd doctor` as a user would, against a real
// daemon and real files (as a user of its own, so that permissions
// hold): all healthy it exits 0; each broken set-up it checks (hooks
// missing, the binaries missing from PATH, the state directory read-only,
// the daemon down) is named, with the command that fixes it, and it
// exits 1.
func TestDoctor(t *testing.T) {
	t.Parallel()
	top := usersTop(t, "cddoctor", "home", "home/project", "state", "run")
	home, project, state := filepath.Join(top, "home"), filepath.Join(top, "home", "project"), filepath.Join(top, "state")
	sock := filepath.Join(top, "run", "d.sock")
	path := filepath.Dir(binary) + ":/usr/local/bin:/usr/bin:/bin"
	env := []string{"HOME=" + home, "CONTINUITYD_STATE_DIR=" + state, "CONTINUITYD_SOCKET=" + sock,
		"XDG_RUNTIME_DIR=", "XDG_STATE_HOME=", "XDG_CONFIG_HOME=", "CLAUDE_CONFIG_DIR=", "CODEX_HOME=", "PATH=" + path}
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Env = project, append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	}
	// line finds a check's line and its fix in doctor's text.
	line := func(out, state, name string) string {
		m := regexp.MustCompile(`(?m)^` + state + `\s+` + regexp.QuoteMeta(name) + `\s+(.*)\n(\s+fix: (.*)\n)?`).FindStringSubmatch(out)
		if m == nil {
			return ""
		}
		return m[1] + " | fix: " + m[3]
	}
	broken := func(what string, env []string, name string, want ...string) {
		t.Helper()
		code, out, errs := run(env, "doctor")
		l := line(out, "FAIL", name)
		if code != exitFailed || l == "" {
			t.Fatalf("%s: exit %d, want 1 with %s failing:\n%s%s", what, code, name, out, errs)
		}
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: the %s line %q does not say %q", what, name, l, w)
			}
		}
	}

	p := startProcWith(t, func(c *exec.Cmd) {
		c.Dir = project
		c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
	}, sock, env, "run")
	if code, out, errs := run(env, "install", "claude-code"); code != exitOK {
		t.Fatalf("install claude-code: exit %d\n%s%s", code, out, errs)
	}

	code, out, errs := run(env, "doctor")
	if code != exitOK || strings.Contains(out, "FAIL") {
		t.Fatalf("all healthy: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct{ name, want string }{
		{"binaries", filepath.Join(filepath.Dir(binary), "continuityd-daemon")},
		{"daemon", "at " + sock},
		{"place", "agent default, working in " + project},
		{"hooks", "claude-code (user scope, ~/.claude/settings.json)"},
		{"hook round trip", "the daemon answered in"},
		{"transcripts", "watching"},
		{"git", "git "},
		{"state directory", state + " is writable"},
		{"upstream local", "ok (agents default)"},
	} {
		if l := line(out, "ok", c.name); !strings.Contains(l, c.want) {
			t.Errorf("all healthy: the %s line %q does not say %q:\n%s", c.name, l, c.want, out)
		}
	}
	var ans struct {
		OK     bool
		Checks []struct{ Name, State string }
	}
	if code, out, _ := run(env, "doctor", "--json"); code != exitOK || json.Unmarshal([]byte(out), &ans) != nil || !ans.OK || len(ans.Checks) < 10 {
		t.Fatalf("doctor --json, all healthy: exit %d\n%s", code, out)
	}

	if code, out, errs := run(env, "uninstall", "claude-code"); code != exitOK {
		t.Fatalf("uninstall claude-code: exit %d\n%s%s", code, out, errs)
	}
	broken("hooks missing", env, "hooks", "no agent runs continuityd's hooks", "continuityd install claude-code")
	// Hooks whose command is not where the file says.
	settings := filepath.Join(home, ".claude", "settings.json")
	if code, _, errs := run(env, "install", "claude-code"); code != exitOK {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile(settings)
	os.WriteFile(settings, bytes.ReplaceAll(b, []byte(`"continuityd hook"`), []byte(`"/nonexistent/continuityd hook"`)), 0o600)
	broken("a hook's command missing", env, "hooks", `"/nonexistent/continuityd hook" does not run: no such file`)
	os.WriteFile(settings, b, 0o600)

	broken("binaries missing from PATH", append(env, "PATH=/usr/bin:/bin"), "binaries", "continuityd and continuityd-daemon not on PATH", "go install ./cmd/...")

	if err := os.Chmod(state, 0o500); err != nil {
		t.Fatal(err)
	}
	broken("state directory read-only", env, "state directory", state+" is not writable: permission denied", "chmod u+rwx "+state)
	os.Chmod(state, 0o700)
	if code, out, _ := run(env, "doctor"); code != exitOK {
		t.Fatalf("healthy again: exit %d\n%s", code, out)
	}

	if code := p.terminate(t); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	broken("daemon down", env, "daemon", "not reachable at "+sock+": no socket there", "continuityd run")
	if code, out, _ := run(env, "doctor", "--json"); code != exitFailed || json.Unmarshal([]byte(out), &ans) != nil || ans.OK {
		t.Fatalf("doctor --json, daemon down: exit %d\n%s", code, out)
	}
	for _, c := range ans.Checks {
		if c.Name == "daemon" && c.State != "fail" || c.Name == "upstreams" && c.State != "skip" {
			t.Errorf("doctor --json, daemon down: %s is %s", c.Name, c.State)
		}
	}
}
