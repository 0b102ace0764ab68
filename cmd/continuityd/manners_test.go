package main

import (
	"os"
	"strings"
	"testing"

	cmdline "github.com/continuityd/continuityd/internal/front/cli"
)

// typo doubles a letter in the middle of word: one edit from it, and
// further from every other word of the table.
func typo(word string) string {
	k := len(word) / 2
	return word[:k+1] + word[k:]
}

// mannersEnv keeps every command away from a real daemon and the user's
// files: a socket nobody listens on, an empty HOME.
func mannersEnv(t *testing.T) []string {
	dir := t.TempDir()
	return []string{"CONTINUITYD_SOCKET=" + dir + "/none.sock", "CONTINUITYD_STATE_DIR=" + dir, "HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
}

// --help and -h on every command and subcommand of the table (a new one is
// covered as it is added), the daemon's own through the front's hand-off:
// exit 0, the usage once, on stdout, with the flags written the GNU way.
func TestHelpAtEveryLevel(t *testing.T) {
	env := mannersEnv(t)
	check := func(args ...string) {
		t.Helper()
		code, out, errs := cli(t, env, "", args...)
		name := strings.Join(args, " ")
		if code != exitOK || errs != "" {
			t.Errorf("continuityd %s: exit %d, stderr %q", name, code, errs)
		}
		if n := strings.Count(out, "usage:"); n != 1 {
			t.Errorf("continuityd %s: the usage printed %d times:\n%s", name, n, out)
		}
		if !strings.Contains(out, "  -h, --help") {
			t.Errorf("continuityd %s: no --help in the flags:\n%s", name, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "-") && !strings.HasPrefix(strings.TrimSpace(l), "--") && !strings.HasPrefix(strings.TrimSpace(l), "-h, --help") {
				t.Errorf("continuityd %s: a flag written Go's way: %q", name, l)
			}
		}
	}
	for _, c := range cmdline.Commands() {
		check(c.Name, "--help")
		check(c.Name, "-h")
		check("help", c.Name)
		for _, s := range c.Subs {
			check(c.Name, s, "--help")
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errs := cli(t, env, "", args...)
		if code != exitOK || errs != "" || strings.Count(out, "usage:") != 1 || !strings.Contains(out, "  snapshot ") {
			t.Errorf("continuityd %s: exit %d, stdout %q, stderr %q", args[0], code, out, errs)
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if code, out, _ := cli(t, env, "", args...); code != exitOK || !strings.HasPrefix(out, "continuityd ") {
			t.Errorf("continuityd %s: exit %d, %q", args[0], code, out)
		}
	}
	if code, _, errs := cli(t, env, ""); code != exitUsage || !strings.Contains(errs, "which command?") {
		t.Errorf("no command: exit %d, %q", code, errs)
	}
}

// A typo of every command, subcommand and flag gets the word meant, and
// exit 2.
func TestTypoSuggestsTheWordMeant(t *testing.T) {
	env := mannersEnv(t)
	check := func(want string, args ...string) {
		t.Helper()
		code, out, errs := cli(t, env, "", args...)
		if code != exitUsage || !strings.Contains(errs, "did you mean "+want+"?") || strings.Count(errs, "\n") != 1 {
			t.Errorf("continuityd %s: exit %d, want 2 and one line with \"did you mean %s?\"; stdout %q, stderr %q",
				strings.Join(args, " "), code, want, out, errs)
		}
	}
	for _, c := range cmdline.Commands() {
		check(c.Name, typo(c.Name))
		for _, s := range c.Subs {
			check(s, c.Name, typo(s))
		}
		flags := c.Flags
		if c.Run != nil {
			flags, _ = cmdline.Describe(c.Run)
		}
		if c.Name == "hook" || c.Name == "statusline" {
			continue // they exit 0 whatever they are given: an agent's hook never fails
		}
		for _, f := range flags {
			args := []string{c.Name}
			if len(c.Subs) > 0 {
				args = append(args, c.Subs[0])
			}
			check("--"+f, append(args, "--"+typo(f))...)
		}
	}
}

// A missing argument is named, not answered with the usage.
func TestMissingArgumentNamed(t *testing.T) {
	env := mannersEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "restore"}, "continuityd snapshot restore: missing the snapshot ID"},
		{[]string{"snapshot", "show"}, "continuityd snapshot show: missing the snapshot ID"},
		{[]string{"snapshot"}, "continuityd snapshot: missing the action"},
		{[]string{"capsule", "validate"}, "continuityd capsule validate: missing the capsule's FILE"},
		{[]string{"signal"}, "continuityd signal: missing the signal's KIND"},
		{[]string{"install"}, "continuityd install: missing the agent: claude-code, codex, mcp"},
		{[]string{"completion"}, "continuityd completion: missing the shell"},
		{[]string{"config"}, "continuityd config: missing the action"},
		{[]string{"deadletter"}, "continuityd deadletter: missing the action"},
		{[]string{"service"}, "continuityd service: missing the action"},
		{[]string{"delx"}, "continuityd delx: missing the action: register"},
		{[]string{"status", "now"}, `continuityd status: unexpected argument "now"`},
	} {
		code, out, errs := cli(t, env, "", c.args...)
		if code != exitUsage || !strings.HasPrefix(errs, c.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("continuityd %s: exit %d, stdout %q, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
}

// `continuityd socket` prints the socket the client commands would use,
// found as they find it: --socket, then $CONTINUITYD_SOCKET, then the
// default place (which TestReadmeTour checks with and without
// XDG_RUNTIME_DIR).
func TestSocketCommand(t *testing.T) {
	if code, out, _ := cli(t, []string{"CONTINUITYD_SOCKET=/from/env.sock"}, "", "socket"); code != exitOK || out != "/from/env.sock\n" {
		t.Errorf("socket with $CONTINUITYD_SOCKET: %d %q", code, out)
	}
	if code, out, _ := cli(t, []string{"CONTINUITYD_SOCKET=/from/env.sock"}, "", "socket", "--socket", "/from/flag.sock"); code != exitOK || out != "/from/flag.sock\n" {
		t.Errorf("socket --socket: %d %q", code, out)
	}
	if code, out, _ := cli(t, []string{"CONTINUITYD_SOCKET=", "HOME=/home/u", "XDG_RUNTIME_DIR=/run/user/7", "XDG_STATE_HOME="}, "", "socket"); code != exitOK ||
		(os.Geteuid() != 0 && out != "/run/user/7/continuityd/continuityd.sock\n") || (os.Geteuid() == 0 && out != "/run/continuityd/continuityd.sock\n") {
		t.Errorf("socket by default: %d %q", code, out)
	}
}

// A daemon that cannot start says why in a sentence on stderr, not in
// the log's record format: here a second daemon on the first's state
// directory.
func TestRunStartupFailureIsASentence(t *testing.T) {
	w := newWorkspace(t)
	startProc(t, w.socket, nil, "run", "--config", w.config)
	code, out, errs := cli(t, nil, "", "run", "--config", w.config)
	if code != exitFailed || out != "" || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "level=") ||
		!strings.HasPrefix(errs, "continuityd: the daemon cannot run: another continuityd is running on state directory "+w.state) {
		t.Fatalf("a second daemon: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
