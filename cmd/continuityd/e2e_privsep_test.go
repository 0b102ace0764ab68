//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/asowner"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// The workdir's owner in these tests is daemonID (40001): usersTop gives
// it the directories it makes. asOwnerClient is that user running the
// CLI, in root's group so that it reaches a socket of mode 0660.
var asOwnerClient = &syscall.Credential{Uid: daemonID, Gid: daemonID, Groups: []uint32{0}}

// gitAs runs git in dir as cred, isolated from the machine's
// configuration.
func gitAs(t *testing.T, cred *syscall.Credential, home, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = userGitEnv(home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// workersOf are the daemon's children that are owners' workers.
func workersOf(t *testing.T, daemon int) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(daemon) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if args := strings.Split(string(cmdline), "\x00"); len(args) >= 2 && args[1] == asowner.WorkerCommand {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// checkWorkerCredentials fails unless process pid runs with uid, gid
// (real, effective, saved and file system ids alike) and no
// supplementary groups.
func checkWorkerCredentials(t *testing.T, pid int, uid, gid uint32) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]uint32{"Uid": uid, "Gid": gid} {
		f := strings.Fields(status[k])
		if len(f) != 4 {
			t.Errorf("the worker's %s line: %q", k, status[k])
			continue
		}
		for _, v := range f {
			if v != strconv.FormatUint(uint64(want), 10) {
				t.Errorf("the worker's %s: %q, want %d four times", k, status[k], want)
				break
			}
		}
	}
	if g := status["Groups"]; g != "" {
		t.Errorf("the worker's supplementary groups: %q, want none", g)
	}
}

// TestRootDaemonActsAsTheOwner runs the daemon as root over a repository
// uid 40001 owns, with root-owned 0600 files in it (as a root-run
// container leaves behind). The daemon's worker for that owner (a child
// of the daemon) runs with the owner's uid, primary gid and no
// supplementary groups; snapshots, an edit's snapshot and a restore go
// through it, and the restored file is the owner's; the handoff file, the
// owner's transcript and the repository are read, and git run on it, as
// the owner, and the transcript's conversation point reaches the worker's
// snapshots. The root-only
// file is in no snapshot (named as skipped, unreadable), and neither
// `snapshot show` nor `snapshot diff`, run by the owner, ever shows its
// content; the root-only handoff file is refused, never read. Then the
// worker is killed: the next snapshot calls go through a new one, and the
// log says it was restarted.
func TestRootDaemonActsAsTheOwner(t *testing.T) {
	top := usersTop(t, "cdprivsep", "owner", "owner/work", "owner/home")
	work, home := filepath.Join(top, "owner", "work"), filepath.Join(top, "owner", "home")
	writeFile(t, work, "README.md", "hello\n")
	writeFile(t, work, "src/main.go", "package main\n")
	if err := filepath.Walk(work, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, daemonID, daemonID)
	}); err != nil {
		t.Fatal(err)
	}
	gitAs(t, asDaemon, home, work, "init", "-q", "-b", "main")
	gitAs(t, asDaemon, home, work, "add", "-A")
	gitAs(t, asDaemon, home, work, "commit", "-q", "-m", "first")
	const secret = "ROOT_ONLY_zebra_4242"
	rootFile := filepath.Join(work, "root-left.env")
	if err := os.WriteFile(rootFile, []byte("TOKEN="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A handoff file the owner cannot read either.
	if err := os.WriteFile(filepath.Join(work, "HANDOFF.md"), []byte("# Goal\nROOT_GOAL_q7\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The owner's Claude Code transcript of the workdir, private to them.
	raw, err := os.ReadFile(filepath.Join("..", "..", "daemon", "sources", "transcript", "testdata", "transcript-autocompact-opus46-v2.1.39.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tr := transcript.NewTracker(transcript.ClaudeCode)
	for l := range strings.SplitSeq(string(raw), "\n") {
		tr.Line([]byte(l))
	}
	session := tr.State().SessionID
	claude := filepath.Join(home, "claude")
	proj := transcript.ClaudeProjectDir(claude, work)
	writeFile(t, proj, session+".jsonl", string(raw))
	if err := os.Chmod(filepath.Join(proj, session+".jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(claude, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, daemonID, daemonID)
	}); err != nil {
		t.Fatal(err)
	}

	state, socket, cfgPath := writeDaemonConfig(t, top, top, true, "", quickSnapshots+fmt.Sprintf(
		"[transcripts]\nclaude_home = %q\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n", claude, work))
	p := startProc(t, socket, nil, "run", "--config", cfgPath)
	start := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]

	workers := workersOf(t, p.cmd.Process.Pid)
	if len(workers) != 1 {
		t.Fatalf("the daemon's workers: %v, want one; log:\n%s", workers, p.stderr)
	}
	owner := asowner.Lookup(daemonID) // no passwd entry: gid 65534, nogroup
	checkWorkerCredentials(t, workers[0], daemonID, owner.GID)
	// The store is the owner's, in the owner's part of the state directory.
	stores, _ := filepath.Glob(filepath.Join(state, "owners", strconv.Itoa(daemonID), "builder-*", "snapshots.git"))
	if len(stores) != 1 {
		t.Fatalf("the owner's store: %v", stores)
	}
	if fi, err := os.Stat(stores[0]); err != nil || fi.Sys().(*syscall.Stat_t).Uid != daemonID {
		t.Errorf("the store is not the owner's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "agents", "builder", "snapshots.git")); !os.IsNotExist(err) {
		t.Errorf("a store in the daemon's own part of the state directory: %v", err)
	}

	// The handoff file is opened as the owner: refused, never read.
	c := p.client()
	defer c.CloseIdleConnections()
	// The transcript is read as the owner, through the worker.
	waitUntil(t, func() string { return "the transcript's usage never reached the resume; log:\n" + p.stderr.String() }, func() bool {
		ctx, _ := get(t, c, "/v1/continuity?peek=1")["context"].(map[string]any)
		return ctx != nil && ctx["used_fraction"] != nil
	})
	if e := refusal(t, c, "HANDOFF.md"); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "permission denied") {
		t.Errorf("the root-only handoff file's refusal: %v", e)
	}

	// A root-only file appears with an edit: the snapshot of the burst
	// (from what changed) leaves it out too.
	laterFile := filepath.Join(work, "src", "root-later.env")
	if err := os.WriteFile(laterFile, []byte("TOKEN="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "README.md", "changed\n")
	edited := waitSnapshots(t, p, 2, time.Minute, "the edit's snapshot")[0]
	d := get(t, c, "/v1/snapshots/"+edited)
	if !strings.Contains(fmt.Sprint(d["skipped_files"]), "root-later.env") {
		t.Errorf("the edit's snapshot does not name the root-only file that came with it as skipped: %v", d)
	}
	// The conversation point, from the transcript read in the daemon,
	// reached the snapshot the worker took.
	if conv, _ := d["conversation"].(map[string]any); conv == nil || conv["session"] != session {
		t.Errorf("the edit's snapshot names the conversation %v, want session %s", d["conversation"], session)
	}
	env := []string{"CONTINUITYD_SOCKET=" + socket}
	if code, out, errOut := cli(t, env, "", "snapshot", "restore", start, "--all"); code != 0 {
		t.Fatalf("restore (exit %d): %s %s", code, out, errOut)
	}
	if got := readFile(t, work, "README.md"); got != "hello\n" {
		t.Errorf("README.md after the restore: %q", got)
	}
	fi, err := os.Lstat(filepath.Join(work, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != daemonID {
		t.Errorf("the restored file is owned by uid %d, want the owner's %d", uid, daemonID)
	}
	for _, f := range []string{rootFile, laterFile} {
		if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), secret) {
			t.Errorf("the restore touched the root-only file %s: %q %v", f, b, err)
		}
	}

	// The root-only file: skipped by the start snapshot, in no snapshot's
	// files or diff, whoever asks.
	d = get(t, c, "/v1/snapshots/"+start)
	skipped := fmt.Sprint(d["skipped_files"])
	if !strings.Contains(skipped, "root-left.env") || !strings.Contains(skipped, "unreadable") {
		t.Errorf("the start snapshot does not name the root-only file as unreadable: %s", skipped)
	}
	for _, id := range listedSnapshots(t, p) {
		for _, args := range [][]string{{"snapshot", "show", id}, {"snapshot", "diff", id}, {"snapshot", "diff", id, start}} {
			code, out, errOut := runAs(t, asOwnerClient, env, "", args...)
			if code != 0 {
				t.Errorf("%v by the owner (exit %d): %s", args, code, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("%v shows the root-only file's content:\n%s", args, out)
			}
			if args[1] == "show" && strings.Contains(out, "root-left.env") && !strings.Contains(out, "unreadable") {
				t.Errorf("%v lists the root-only file as held:\n%s", args, out)
			}
		}
	}
	if code, out, _ := runAs(t, asOwnerClient, env, "", "snapshot", "diff", edited); code != 0 || !strings.Contains(out, "+changed") {
		t.Errorf("the owner's diff of the edit (exit %d): %s", code, out)
	}
	// The repository's .git is read as the owner: a commit is a receipt.
	writeFile(t, work, "src/util.go", "package main\n")
	os.Chown(filepath.Join(work, "src", "util.go"), daemonID, daemonID)
	gitAs(t, asDaemon, home, work, "add", "src/util.go")
	gitAs(t, asDaemon, home, work, "commit", "-q", "-m", "the owner's second commit")
	waitUntil(t, func() string { return "no receipt of the owner's commit; log:\n" + p.stderr.String() }, func() bool {
		r := get(t, c, "/v1/continuity?peek=1")
		return strings.Contains(fmt.Sprint(r["since_last_visit"]), "the owner's second commit")
	})
	if r := fmt.Sprint(get(t, c, "/v1/continuity?peek=1")); strings.Contains(r, "ROOT_GOAL_q7") {
		t.Errorf("the root-only handoff file reached the resume: %s", r)
	}
	// The work-lost checks after each snapshot read the repository with
	// git as its owner: git finds nothing dubious in that.
	if log := p.stderr.String(); strings.Contains(log, "dubious ownership") {
		t.Errorf("git ran on the owner's repository as another user:\n%s", log)
	}

	// The worker dies: the next snapshot calls start a new one.
	if err := syscall.Kill(workers[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() string { return "the killed worker was not replaced; log:\n" + p.stderr.String() }, func() bool {
		resp, err := c.Get("http://d/v1/snapshots")
		if err != nil {
			return false
		}
		resp.Body.Close()
		now := workersOf(t, p.cmd.Process.Pid)
		return resp.StatusCode == 200 && len(now) == 1 && now[0] != workers[0]
	})
	before := len(listedSnapshots(t, p))
	writeFile(t, work, "src/main.go", "package main\n\nfunc main() {}\n")
	waitSnapshots(t, p, before+1, time.Minute, "a snapshot through the new worker")
	if log := p.stderr.String(); !strings.Contains(log, "restarted the owner's worker") {
		t.Errorf("the log does not say the worker was restarted:\n%s", log)
	}
	checkWorkerCredentials(t, workersOf(t, p.cmd.Process.Pid)[0], daemonID, owner.GID)
	if code := p.terminate(t); code != 0 {
		t.Errorf("the daemon's exit status: %d; log:\n%s", code, p.stderr)
	}
	if w := workersOf(t, p.cmd.Process.Pid); len(w) != 0 {
		t.Errorf("workers outlive the daemon: %v", w)
	}
}

// TestNoWorkerWhenTheDaemonIsTheOwner: a daemon running as the workdir's
// owner (a user's daemon, here uid 40001), or as root over root's own
// workdir, snapshots in process and starts no worker. The worker command
// run by hand refuses.
func TestNoWorkerWhenTheDaemonIsTheOwner(t *testing.T) {
	top := usersTop(t, "cdnoworker", "daemon", "daemon/work")
	home := filepath.Join(top, "daemon")
	work := filepath.Join(home, "work")
	writeFile(t, work, "notes.md", "mine\n")
	os.Chown(filepath.Join(work, "notes.md"), daemonID, daemonID)
	state, socket, cfgPath := writeDaemonConfig(t, top, home, false, "", fmt.Sprintf("[[agent]]\nname = \"builder\"\nworkdir = %q\n", work))
	p := startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	waitSnapshots(t, p, 1, time.Minute, "the user daemon's start snapshot")
	if w := workersOf(t, p.cmd.Process.Pid); len(w) != 0 {
		t.Errorf("a user's daemon started workers: %v", w)
	}
	if _, err := os.Stat(filepath.Join(state, "agents", "builder", "snapshots.git")); err != nil {
		t.Errorf("the user daemon's store is not in its own state directory: %v", err)
	}
	p.terminate(t)

	ws := newWorkspace(t) // root's, as the test runs
	p = startProc(t, ws.socket, nil, "run", "--config", ws.config)
	waitSnapshots(t, p, 1, time.Minute, "root's start snapshot of root's workdir")
	if w := workersOf(t, p.cmd.Process.Pid); len(w) != 0 {
		t.Errorf("root over its own workdir started workers: %v", w)
	}
	p.terminate(t)

	code, _, errOut := runBinary(t, filepath.Join(filepath.Dir(binary), "continuityd-daemon"), nil, "", asowner.WorkerCommand)
	if code != 2 || !strings.Contains(errOut, "The daemon starts its workers itself") {
		t.Errorf("the worker command run by hand: exit %d, %q", code, errOut)
	}
}

// TestRootStoreMovesToTheOwner: a store the daemon kept itself (run as
// root over a workdir root owned then) moves to the owner once the
// workdir is another user's: its history is kept, every entry of it is
// the owner's, and a link planted in it is given away, never followed.
func TestRootStoreMovesToTheOwner(t *testing.T) {
	top := usersTop(t, "cdmove", "owner", "owner/work")
	work := filepath.Join(top, "owner", "work")
	if err := os.Chown(work, 0, 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "notes.md", "one\n")
	state, socket, cfgPath := writeDaemonConfig(t, top, top, false, "", quickSnapshots+fmt.Sprintf("[[agent]]\nname = \"builder\"\nworkdir = %q\n", work))
	p := startProc(t, socket, nil, "run", "--config", cfgPath)
	waitSnapshots(t, p, 1, time.Minute, "root's start snapshot")
	writeFile(t, work, "notes.md", "two\n")
	history := waitSnapshots(t, p, 2, time.Minute, "root's snapshot of the edit")
	p.terminate(t)
	if w := workersOf(t, p.cmd.Process.Pid); len(w) != 0 {
		t.Fatalf("root over its own workdir started workers: %v", w)
	}
	old := filepath.Join(state, "agents", "builder", "snapshots.git")
	rootOnly := filepath.Join(top, "root-only")
	if err := os.WriteFile(rootOnly, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rootOnly, filepath.Join(old, "planted")); err != nil {
		t.Fatal(err)
	}

	// The workdir becomes the owner's.
	if err := filepath.Walk(work, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, daemonID, daemonID)
	}); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, socket, nil, "run", "--config", cfgPath)
	if got := listedSnapshots(t, p); len(got) != 2 || got[0] != history[0] || got[1] != history[1] {
		t.Fatalf("the snapshots after the move: %v, want %v; log:\n%s", got, history, p.stderr)
	}
	if log := p.stderr.String(); !strings.Contains(log, "moved the agent's snapshot store to its workdir's owner") {
		t.Errorf("the log does not say the store moved:\n%s", log)
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("the old store is still there: %v", err)
	}
	stores, _ := filepath.Glob(filepath.Join(state, "owners", strconv.Itoa(daemonID), "builder-*", "snapshots.git"))
	if len(stores) != 1 {
		t.Fatalf("the owner's store: %v", stores)
	}
	err := filepath.Walk(filepath.Dir(stores[0]), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != daemonID {
			t.Errorf("%s is uid %d's, not the owner's", p, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(rootOnly); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the file a planted link names was given away: %v", err)
	}
	if code, out, errOut := cli(t, []string{"CONTINUITYD_SOCKET=" + socket}, "", "snapshot", "restore", history[1], "--all"); code != 0 {
		t.Fatalf("restoring a snapshot from before the move (exit %d): %s %s", code, out, errOut)
	}
	if got := readFile(t, work, "notes.md"); got != "one\n" {
		t.Errorf("notes.md after the restore: %q", got)
	}
	p.terminate(t)
}
