package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// hostileNames are file names a shell, a JSON encoder or markdown would
// mangle: a line break, a tab, quotes, backticks, command substitutions
// (which must never run: each would create marker-ran in the shell's
// directory), a leading "-", a backslash, bytes that are not UTF-8.
var hostileNames = []string{
	"line\nbreak.txt", "tab\tname.txt", `quo"te's.txt`, "back`tick`.txt", "$(touch marker-ran).txt",
	"`touch marker-ran`.txt", "-leading.txt", `back\slash.txt`, "bad\xff\xfeutf8.txt", `"quoted".txt`,
}

// TestWorkLostNamesRoundTripInAnyShell: files with hostile names,
// uncommitted and removed, are one loss; the command resume gives for it,
// run as it is by bash and by dash, brings every file back byte for byte
// and runs nothing a name holds; so does the per-path command resume gives
// beside it. The wait event, the SessionStart context and the markdown
// resume give the same command, and the markdown shows each name as one
// code span. --path takes a name that is not UTF-8 as the shell gives it,
// and a path that names nothing exits 1 naming it.
func TestWorkLostNamesRoundTripInAnyShell(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "dash"} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Skipf("%s is not installed", sh)
		}
	}
	w, work := snapshotWorkspace(t, "")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	// The shells find the CLI on PATH, as a person's would, and run in a
	// directory of their own, where a name that ran would leave its marker.
	shellEnv := append([]string{"PATH=" + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")}, env...)
	shellDir := t.TempDir()
	writeFile(t, work, "a.go", "committed\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()
	feed := &lossFeed{t: t, c: c}
	feed.workLost()

	content := func(name string) string { return fmt.Sprintf("the work on %q\n", name) }
	for _, n := range hostileNames {
		writeFile(t, work, n, content(n))
	}
	// Each name added by a snapshot since the start one before they go.
	waitUntil(t, func() string { return "a snapshot holding the new files; log:\n" + p.stderr.String() }, func() bool {
		added := 0
		for _, s := range get(t, c, "/v1/snapshots")["snapshots"].([]any) {
			if m := s.(map[string]any); m["trigger"] != "start" {
				added += int(m["added"].(float64))
			}
		}
		return added >= len(hostileNames)
	})

	// lose removes every file and waits for resume to list the loss (one
	// or more entries when the removal spanned snapshots), naming every
	// file in its exact form.
	lose := func(when string) []capsule.WorkLost {
		t.Helper()
		for _, n := range hostileNames {
			if err := os.Remove(filepath.Join(work, n)); err != nil {
				t.Fatal(err)
			}
		}
		var lost []capsule.WorkLost
		waitUntil(t, func() string { return fmt.Sprintf("%s: resume's work_lost %+v; log:\n%s", when, lost, p.stderr) }, func() bool {
			lost = resumeWorkLost(t, c)
			n := 0
			for _, l := range lost {
				n += len(l.Paths)
			}
			return n == len(hostileNames)
		})
		var named []string
		for _, l := range lost {
			for _, q := range l.Paths {
				name, err := termsafe.ParseExact(q)
				if err != nil {
					t.Fatalf("%s: work_lost path %q: %v", when, q, err)
				}
				named = append(named, name)
			}
		}
		if want := slices.Sorted(slices.Values(hostileNames)); !slices.Equal(slices.Sorted(slices.Values(named)), want) {
			t.Fatalf("%s: work_lost names %q, want %q", when, named, want)
		}
		return lost
	}
	// run pastes each command into sh as it is.
	run := func(when, sh string, commands []string) {
		t.Helper()
		for _, command := range commands {
			cmd := exec.Command(sh, "-c", command)
			cmd.Dir, cmd.Env = shellDir, append(os.Environ(), shellEnv...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %s -c %q: %v\n%s", when, sh, command, err, out)
			}
		}
	}
	// back checks every file is back byte for byte, nothing else is in the
	// tree, nothing a name holds ran, and waits for resume to see the work
	// back (a snapshot holds it again, so the next removal is a loss).
	back := func(when string) {
		t.Helper()
		for _, n := range hostileNames {
			if got, err := os.ReadFile(filepath.Join(work, n)); err != nil || string(got) != content(n) {
				t.Fatalf("%s: %q is %q (%v)", when, n, got, err)
			}
		}
		entries, err := os.ReadDir(work)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if want := slices.Sorted(slices.Values(append([]string{".git", "a.go"}, hostileNames...))); !slices.Equal(slices.Sorted(slices.Values(names)), want) {
			t.Fatalf("%s: the workdir holds %q, want %q", when, names, want)
		}
		for _, dir := range []string{shellDir, work, w.dir} {
			if _, err := os.Stat(filepath.Join(dir, "marker-ran")); err == nil {
				t.Fatalf("%s: a command in a file name ran (marker in %s)", when, dir)
			}
		}
		waitUntil(t, func() string { return when + ": resume still lists the work as lost; log:\n" + p.stderr.String() }, func() bool {
			return len(resumeWorkLost(t, c)) == 0
		})
	}

	// bash, with the command of resume's JSON; the wait event and the
	// SessionStart context give the same.
	lost := lose("removed")
	var commands []string
	for _, l := range lost {
		if want := "continuityd snapshot restore --lost " + l.ID + " --agent builder"; l.Restore != want {
			t.Fatalf("restore %q, want %q", l.Restore, want)
		}
		commands = append(commands, l.Restore)
	}
	var events []string
	waitUntil(t, func() string { return fmt.Sprintf("work_lost events %q, want %q", events, commands) }, func() bool {
		for _, e := range feed.workLost() {
			events = append(events, e.Restore)
		}
		return len(events) >= len(commands)
	})
	if !slices.Equal(events, commands) {
		t.Fatalf("the wait events' commands %q, resume's %q", events, commands)
	}
	ctx := hookContext(t, env, work)
	code, md, _ := cli(t, env, "", "resume")
	for _, l := range lost {
		if !strings.Contains(ctx, l.Restore) {
			t.Fatalf("the SessionStart context does not give %q:\n%s", l.Restore, ctx)
		}
		if code != 0 || !strings.Contains(md, capsule.CodeSpan(l.Restore)) {
			t.Fatalf("the markdown resume (exit %d) does not give %q:\n%s", code, l.Restore, md)
		}
	}
	for _, n := range hostileNames {
		if !strings.Contains(md, capsule.CodeSpan(termsafe.Name(n))) {
			t.Errorf("the markdown resume does not show %q as one code span %s:\n%s", n, capsule.CodeSpan(termsafe.Name(n)), md)
		}
	}
	run("bash, by id", "bash", commands)
	back("bash, by id")

	// dash, with the command of the markdown resume, as a person copies it.
	lost = lose("removed again")
	code, md, _ = cli(t, env, "", "resume")
	commands = nil
	for _, l := range lost {
		if code != 0 || !strings.Contains(md, "`"+l.Restore+"`") {
			t.Fatalf("the markdown resume (exit %d) does not give %q:\n%s", code, l.Restore, md)
		}
		commands = append(commands, l.Restore)
	}
	run("dash, by id", "dash", commands)
	back("dash, by id")

	// The per-path command, in both shells.
	for _, sh := range []string{"dash", "bash"} {
		lost = lose("removed for the per-path command in " + sh)
		commands = nil
		for _, l := range lost {
			commands = append(commands, l.RestorePaths)
		}
		run(sh+", by path", sh, commands)
		back(sh + ", by path")
	}

	// --path with the name's bytes as the shell gives them, and as restore
	// prints it; a path that names nothing.
	snap := lost[0].Snapshot
	bad := "bad\xff\xfeutf8.txt"
	for _, arg := range []string{bad, termsafe.Name(bad)} {
		if err := os.Remove(filepath.Join(work, bad)); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := cli(t, env, "", "snapshot", "restore", snap, "--path", arg)
		if code != 0 || !strings.Contains(out, "restore "+termsafe.Name(bad)+"\n") || strings.ContainsRune(out, '\uFFFD') {
			t.Fatalf("restore --path %q: exit %d\n%s%s", arg, code, out, errOut)
		}
		if got := readFile(t, work, bad); got != content(bad) {
			t.Fatalf("restore --path %q: the file holds %q", arg, got)
		}
	}
	for _, missing := range []string{"no-such-file.txt", "nope\xff.txt"} {
		code, out, errOut := cli(t, env, "", "snapshot", "restore", snap, "--path", "a.go", "--path", missing)
		if code != 1 || !strings.Contains(errOut, "NOT_FOUND (paths[1])") || !strings.Contains(errOut, termsafe.Name(missing)) {
			t.Errorf("restore --path %q: exit %d, want 1 naming it\n%s%s", missing, code, out, errOut)
		}
	}
	if code, _, errOut := cli(t, env, "", "snapshot", "restore", "--lost", "wl-000000000000"); code != 1 || !strings.Contains(errOut, "wl-000000000000") {
		t.Errorf("an unknown loss: exit %d %s", code, errOut)
	}
}
