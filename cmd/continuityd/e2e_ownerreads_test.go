//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRootDaemonReadsTheTreeAsItsOwner runs the daemon as root over a
// repository uid 40001 owns, in which a root-run tool left a 0600
// .gitignore (in sub/) whose pattern covers a file the owner then makes,
// and in which a .git file (vendor/lib/.git) leads to a repository only
// root may read, outside the workdir.
//
// The daemon reads the .gitignore as the owner's own git does: git, run
// by the owner, cannot read it, warns, and lists the file as untracked;
// the daemon cannot read it either (its watcher reads through the
// owner's worker), so the file is the owner's work: reported, snapshotted.
// Nothing of the .gitignore's content is in the log, status, the resume
// or any snapshot. Commits in the root-only repository yield no receipt
// (the owner's own commits do). A reload that removes the owner's last
// agent ends the owner's worker, reaped.
func TestRootDaemonReadsTheTreeAsItsOwner(t *testing.T) {
	top := usersTop(t, "cdownerreads", "owner", "owner/work", "owner/home")
	work, home := filepath.Join(top, "owner", "work"), filepath.Join(top, "owner", "home")
	rootWork := filepath.Join(top, "rootwork") // the other agent's, root's own
	if err := os.Mkdir(rootWork, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "README.md", "hello\n")
	writeFile(t, work, "sub/keep.md", "kept\n")
	writeFile(t, work, "vendor/lib/lib.go", "package lib\n")
	const rootRepoSubject = "ROOT_SUBJECT_w5"
	rootRepo := filepath.Join(top, "rootrepo") // root's, 0700: the owner may not enter
	if err := os.Mkdir(rootRepo, 0o700); err != nil {
		t.Fatal(err)
	}
	userGit(t, rootRepo, "init", "-q", "-b", "main")
	userGit(t, rootRepo, "commit", "-q", "--allow-empty", "-m", rootRepoSubject+" first")
	writeFile(t, work, "vendor/lib/.git", "gitdir: "+filepath.Join(rootRepo, ".git")+"\n")
	if err := filepath.Walk(work, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, daemonID, daemonID)
	}); err != nil {
		t.Fatal(err)
	}
	gitAs(t, asDaemon, home, work, "init", "-q", "-b", "main")
	gitAs(t, asDaemon, home, work, "add", "README.md", "sub/keep.md")
	gitAs(t, asDaemon, home, work, "commit", "-q", "-m", "first")
	// What a root-run tool leaves behind: root's, 0600.
	const ignoreMark = "ROOT_IGNORE_MARK_v8"
	rootIgnore := filepath.Join(work, "sub", ".gitignore")
	if err := os.WriteFile(rootIgnore, []byte("# "+ignoreMark+"\n*.zq7\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := newDaemonConfig(top, top, true, "")
	socket, cfgPath := cfg.socket, cfg.path
	keeper := fmt.Sprintf("[[agent]]\nname = \"keeper\"\nworkdir = %q\n", rootWork)
	builder := fmt.Sprintf("[[agent]]\nname = \"builder\"\nworkdir = %q\n\n", work)
	cfg.write(t, quickSnapshots+builder+keeper)
	p := startProc(t, socket, nil, "run", "--config", cfgPath)
	env := []string{"CONTINUITYD_SOCKET=" + socket}
	c := p.client()
	defer c.CloseIdleConnections()
	snaps := func() []string {
		var ids []string
		list, _ := get(t, c, "/v1/snapshots?agent=builder")["snapshots"].([]any)
		for _, s := range list {
			ids = append(ids, s.(map[string]any)["id"].(string))
		}
		return ids
	}
	waitUntil(t, func() string { return "no start snapshot of the owner's workdir; log:\n" + p.stderr.String() }, func() bool {
		return len(snaps()) == 1
	})
	start := snaps()[0]
	workers := workersOf(t, p.cmd.Process.Pid)
	if len(workers) != 1 {
		t.Fatalf("the daemon's workers: %v, want the owner's one; log:\n%s", workers, p.stderr)
	}

	// The owner makes a file the unreadable .gitignore's pattern covers.
	made := filepath.Join(work, "sub", "made.zq7")
	if err := os.WriteFile(made, []byte("the owner's work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(made, daemonID, daemonID); err != nil {
		t.Fatal(err)
	}
	// The owner's git cannot read the .gitignore: it warns, and the file
	// is untracked work, not ignored.
	cmd := exec.Command("git", "status", "--porcelain=v1", "--ignored", "--untracked-files=all")
	cmd.Dir, cmd.Env = work, userGitEnv(home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
	var gitOut, gitErr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &gitOut, &gitErr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the owner's git status: %v\n%s", err, gitErr.String())
	}
	if !strings.Contains(gitOut.String(), "?? sub/made.zq7\n") || !strings.Contains(gitErr.String(), "unable to access") {
		t.Fatalf("the owner's git does not pass over the unreadable .gitignore as expected:\n%s%s", gitOut.String(), gitErr.String())
	}
	// The daemon: the file is activity, and the snapshot it starts holds it.
	waitUntil(t, func() string {
		return "the owner's file under the unreadable .gitignore was not taken for work; log:\n" + p.stderr.String()
	}, func() bool {
		ids := snaps()
		if len(ids) < 2 {
			return false
		}
		files, _ := get(t, c, "/v1/snapshots/"+ids[0]+"?agent=builder")["files"].([]any)
		for _, f := range files {
			if f.(map[string]any)["path"] == "sub/made.zq7" {
				return true
			}
		}
		return false
	})
	if r := get(t, c, "/v1/continuity?peek=1&agent=builder"); !strings.Contains(fmt.Sprint(r["since_last_visit"]), "sub/made.zq7") {
		t.Errorf("the resume does not name the owner's file as changed: %v", r["since_last_visit"])
	}
	if d := get(t, c, "/v1/snapshots/"+start+"?agent=builder"); !strings.Contains(fmt.Sprint(d["skipped_files"]), "sub/.gitignore") {
		t.Errorf("the start snapshot does not name the root-only .gitignore as skipped: %v", d["skipped_files"])
	}

	// Commits in the root-only repository give no receipt; the owner's do.
	userGit(t, rootRepo, "commit", "-q", "--allow-empty", "-m", rootRepoSubject+" second")
	for i, subject := range []string{"the owner's commit one", "the owner's commit two"} {
		writeFile(t, work, fmt.Sprintf("c%d.txt", i), "x\n")
		os.Chown(filepath.Join(work, fmt.Sprintf("c%d.txt", i)), daemonID, daemonID)
		gitAs(t, asDaemon, home, work, "add", fmt.Sprintf("c%d.txt", i))
		gitAs(t, asDaemon, home, work, "commit", "-q", "-m", subject)
		waitUntil(t, func() string { return "no receipt of " + subject + "; log:\n" + p.stderr.String() }, func() bool {
			return strings.Contains(fmt.Sprint(get(t, c, "/v1/continuity?peek=1&agent=builder")), subject)
		})
	}

	// Nothing of the .gitignore's content, nor of the root-only
	// repository, anywhere.
	seen := map[string]string{"the log": p.stderr.String()}
	for _, path := range []string{"/v1/status", "/v1/continuity?peek=1&agent=builder", "/v1/snapshots?agent=builder"} {
		seen[path] = fmt.Sprint(get(t, c, path))
	}
	for _, id := range snaps() {
		seen["snapshot "+id] = fmt.Sprint(get(t, c, "/v1/snapshots/"+id+"?agent=builder"))
		for _, args := range [][]string{{"snapshot", "show", "--agent", "builder", id}, {"snapshot", "diff", "--agent", "builder", id},
			{"snapshot", "diff", "--agent", "builder", id, start}} {
			code, out, errOut := runAs(t, asOwnerClient, env, "", args...)
			if code != 0 {
				t.Errorf("%v by the owner (exit %d): %s", args, code, errOut)
			}
			seen[strings.Join(args, " ")] = out + errOut
		}
	}
	for _, who := range []*syscall.Credential{nil, asOwnerClient} {
		var code int
		var out, errOut string
		if who == nil {
			code, out, errOut = cli(t, env, "", "status")
		} else {
			code, out, errOut = runAs(t, who, env, "", "status")
		}
		if code != 0 && code != 1 { // 1: something is degraded, said in the text
			t.Errorf("status (exit %d): %s %s", code, out, errOut)
		}
		seen[fmt.Sprintf("status as %v", who)] = out + errOut
	}
	for where, text := range seen {
		for _, secret := range []string{ignoreMark, "*.zq7", rootRepoSubject} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q:\n%s", where, secret, text)
			}
		}
	}

	// A reload that removes the owner's last agent ends their worker.
	cfg.write(t, quickSnapshots+keeper)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() string { return "the owner's worker was not stopped; log:\n" + p.stderr.String() }, func() bool {
		return strings.Contains(p.stderr.String(), "stopped the owner's worker")
	})
	if w := workersOf(t, p.cmd.Process.Pid); len(w) != 0 {
		t.Errorf("workers after the owner's last agent went: %v", w)
	}
	if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(workers[0]), "stat")); err == nil {
		t.Errorf("the stopped worker %d is still a process (not reaped): %s", workers[0], st)
	}
	if agents, _ := get(t, c, "/v1/status")["agents"].([]any); len(agents) != 1 {
		t.Errorf("agents after the reload: %v", agents)
	}
	if code := p.terminate(t); code != 0 {
		t.Errorf("the daemon's exit status: %d; log:\n%s", code, p.stderr)
	}
}
