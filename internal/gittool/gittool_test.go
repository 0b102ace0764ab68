package gittool_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func findTool(t *testing.T) *gittool.Tool {
	t.Helper()
	tool, err := gittool.Find(context.Background(), "")
	if err != nil {
		t.Skip(err)
	}
	return tool
}

// run runs args in dir through the tool; stdout is a terminal when tty
// is set.
func run(t *testing.T, tool *gittool.Tool, dir, stdin string, tty *os.File, args ...string) (string, error) {
	t.Helper()
	cmd := tool.Command(context.Background(), gittool.Run{Args: args, Dir: dir, Reading: true})
	return runCmd(cmd, stdin, tty)
}

func runCmd(cmd *exec.Cmd, stdin string, tty *os.File) (string, error) {
	var out bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &out
	if tty != nil {
		cmd.Stdout = tty
	}
	err := cmd.Run()
	return out.String(), err
}

// plain runs args in dir as the repository's owner would, with plain
// git: the control that shows a trigger runs the key's program.
func plain(r *gittooltest.Repo, stdin string, tty *os.File, args ...string) (string, error) {
	cmd := exec.Command(r.Git, args...)
	cmd.Dir = r.Dir
	cmd.Env = []string{"PATH=" + r.Bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + r.Dir, "TERM=xterm",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0"}
	return runCmd(cmd, stdin, tty)
}

// agentReads are the commands the daemon runs on an agent's repository
// (work-lost checks, commit subjects): the daemon's own packages run them
// through their real code paths in their tests as well.
func agentReads(missing string) []struct {
	args  []string
	stdin string
} {
	return []struct {
		args  []string
		stdin string
	}{
		{[]string{"cat-file", "--batch"}, "HEAD^{commit}\nHEAD:./\nHEAD:./a.txt\n" + missing + "\nlazy\n"},
		{[]string{"cat-file", "commit", "HEAD"}, ""},
		{[]string{"cat-file", "commit", missing}, ""},
		{[]string{"ls-tree", "-r", "-z", "HEAD", "--", "a.txt", "b.txt"}, ""},
		{[]string{"rev-parse", "--git-dir", "--git-common-dir"}, ""},
	}
}

// TestEveryKeyIsKeptFromRunning goes over every configuration key that can
// make git start a program (gittooltest.Keys), each in a repository of its
// own whose config points it at a marker script: plain git runs the
// script when the key's trigger runs (so the setting is live), the same
// trigger through the daemon's settings does not (unless the key is one
// the daemon never uses: a driver, an alias, a tool), nor does any command
// the daemon runs on an agent's repository; and where the daemon's
// settings name the key, git itself says they win (so removing one from
// Config fails here).
func TestEveryKeyIsKeptFromRunning(t *testing.T) {
	tool := findTool(t)
	for _, k := range gittooltest.Keys() {
		t.Run(k.Name(), func(t *testing.T) {
			if k.MinGit != [2]int{} && !tool.Version.AtLeast(k.MinGit[0], k.MinGit[1], 0) {
				t.Skipf("git %s does not know %s", tool.Version, k.Key)
			}
			r := gittooltest.New(t, t.TempDir(), k)
			script := r.Script(k)
			sub := func(args []string) []string {
				out := slices.Clone(args)
				for i := range out {
					out[i] = strings.ReplaceAll(out[i], "{script}", script)
				}
				return out
			}
			if k.Overridden {
				out, err := run(t, tool, r.Dir, "", nil, "config", "--get", strings.ReplaceAll(k.Key, "{script}", script))
				if got := strings.TrimSuffix(out, "\n"); err != nil || got != k.Neutral {
					t.Errorf("under the daemon's settings git reads %s as %q (%v), want %q", k.Key, got, err, k.Neutral)
				}
			}
			for _, c := range agentReads("0123456789abcdef0123456789abcdef01234567") {
				run(t, tool, r.Dir, c.stdin, nil, c.args...) // may fail; must run nothing
			}
			if f := r.Fired(); len(f) > 0 {
				t.Fatalf("the daemon's reads of the repository ran %v", f)
			}
			if k.Trigger == nil {
				return
			}
			var tty *os.File
			if k.TTY {
				tty = openTTY(t)
			}
			if !k.Unused {
				out, _ := run(t, tool, r.Dir, k.Stdin, tty, sub(k.Trigger)...)
				if f := r.Fired(); len(f) > 0 {
					t.Fatalf("git %s under the daemon's settings ran %v:\n%s", strings.Join(k.Trigger, " "), f, out)
				}
			}
			out, _ := plain(r, k.Stdin, tty, sub(k.Trigger)...)
			if !r.FiredKey(k) {
				t.Fatalf("the control does not work: plain git %s did not run %s's script (markers %v):\n%s",
					strings.Join(k.Trigger, " "), k.Key, r.Fired(), out)
			}
		})
	}
}

// TestAgentReadsOfAHostileRepository runs the daemon's commands on a
// repository that sets every key at once, is a partial clone with an
// ssh:// promisor remote reached through core.sshCommand, and has a
// branch at a commit it lacks: nothing runs, while plain git reading that
// commit runs the ssh command (the attack is live).
func TestAgentReadsOfAHostileRepository(t *testing.T) {
	tool := findTool(t)
	r := gittooltest.New(t, t.TempDir())
	missing := r.MakePartialClone(t)
	for _, c := range agentReads(missing) {
		out, err := run(t, tool, r.Dir, c.stdin, nil, c.args...)
		if c.args[1] == "--batch" && (err != nil || !strings.Contains(out, missing+" missing")) {
			t.Errorf("cat-file --batch: %v\n%s", err, out)
		}
	}
	if f := r.Fired(); len(f) > 0 {
		t.Fatalf("the daemon's reads ran %v", f)
	}
	plain(r, "", nil, "cat-file", "commit", missing)
	if !slices.ContainsFunc(r.Fired(), func(s string) bool { return strings.HasPrefix(s, gittooltest.MarkersOfPartialClone+":") }) {
		t.Fatalf("the control does not work: plain git did not fetch the missing commit through the ssh command: %v", r.Fired())
	}
}

// TestEnvironmentIsBuiltFromScratch: nothing of the daemon's environment
// reaches git (a token, GIT_DIR, GIT_CONFIG_*), and the settings that
// keep programs and transports off are there.
func TestEnvironmentIsBuiltFromScratch(t *testing.T) {
	tool := findTool(t)
	t.Setenv("QDAY_TOKEN", "secret-token")
	t.Setenv("GIT_DIR", "/elsewhere")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/tmp/hooks'")
	t.Setenv("GIT_SSH", "/tmp/ssh")
	cmd := tool.Command(context.Background(), gittool.Run{Args: []string{"var", "-l"}, Dir: t.TempDir(), Env: []string{"GIT_INDEX_FILE=/x"}})
	for _, kv := range cmd.Env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "QDAY_TOKEN", "GIT_DIR", "GIT_CONFIG_PARAMETERS", "GIT_SSH":
			t.Errorf("%s reached git's environment", kv)
		}
	}
	// Each of these is a second lock behind a -c setting or a refused
	// transport, which TestEveryKeyIsKeptFromRunning cannot tell apart.
	for _, want := range []string{"GIT_NO_LAZY_FETCH=1", "GIT_ALLOW_PROTOCOL=", "GIT_PROTOCOL_FROM_USER=0",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"HOME=/dev/null", "XDG_CONFIG_HOME=/dev/null", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "GIT_PROXY_COMMAND=",
		"GIT_SSH_COMMAND=/dev/null", "GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=:", "GIT_SEQUENCE_EDITOR=:",
		"GIT_NO_REPLACE_OBJECTS=1", "LC_ALL=C", "GIT_INDEX_FILE=/x"} {
		if !slices.Contains(cmd.Env, want) {
			t.Errorf("git's environment lacks %s: %v", want, cmd.Env)
		}
	}
	if slices.Contains(cmd.Env, "GIT_OPTIONAL_LOCKS=0") {
		t.Error("a run that is not Reading has GIT_OPTIONAL_LOCKS=0")
	}
	if cmd.Args[1] != "--no-pager" {
		t.Errorf("args %v do not start with --no-pager", cmd.Args)
	}
	out, err := runCmd(cmd, "", nil)
	if err != nil || strings.Contains(out, "secret-token") {
		t.Fatalf("git var -l: %v\n%s", err, out)
	}
	undo := tool.Command(context.Background(), gittool.Run{Args: []string{"version"}, Env: []string{"GIT_ALLOW_PROTOCOL=ssh"}})
	if err := undo.Run(); err == nil || !strings.Contains(err.Error(), "GIT_ALLOW_PROTOCOL") {
		t.Fatalf("a run that sets GIT_ALLOW_PROTOCOL: %v", err)
	}
}

func ver(major, minor, patch int) gittool.Version {
	return gittool.Version{Major: major, Minor: minor, Patch: patch}
}

// TestVersion: git's answer is read, and GIT_NO_LAZY_FETCH is taken as
// honoured from the releases that brought it, per line.
func TestVersion(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   gittool.Version
		honour bool
	}{
		{"git version 2.39.5", ver(2, 39, 5), true},
		{"git version 2.39.3", ver(2, 39, 3), false},
		{"git version 2.39.4", ver(2, 39, 4), true},
		{"git version 2.38.5", ver(2, 38, 5), false},
		{"git version 2.44.0", ver(2, 44, 0), false},
		{"git version 2.44.1", ver(2, 44, 1), true},
		{"git version 2.43.3", ver(2, 43, 3), false},
		{"git version 2.45.0", ver(2, 45, 0), true},
		{"git version 2.45.2.windows.1", ver(2, 45, 2), true},
		{"git version 3.0", ver(3, 0, 0), true},
		{"git version 2.25.1\n", ver(2, 25, 1), false},
	} {
		v, ok := gittool.ParseVersion(c.in)
		if !ok || v != c.want || v.HonoursNoLazyFetch() != c.honour {
			t.Errorf("%q: %v %v honours=%v, want %v honours=%v", c.in, v, ok, v.HonoursNoLazyFetch(), c.want, c.honour)
		}
	}
	if _, ok := gittool.ParseVersion("hub version 2.14"); ok {
		t.Error("a version that is not git's parsed")
	}
}

// TestFindSaysWhatIsMissing: a git that is not there is ErrUnavailable,
// with how to get it.
func TestFindSaysWhatIsMissing(t *testing.T) {
	_, err := gittool.Find(context.Background(), filepath.Join(t.TempDir(), "no-git"))
	if err == nil || !strings.Contains(err.Error(), "install git") {
		t.Fatalf("err = %v", err)
	}
}
