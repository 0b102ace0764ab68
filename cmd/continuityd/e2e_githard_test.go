//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
)

// TestGitIsAToolAsRoot is the attack of a workdir's owner on a daemon run
// as root: the workdir, owned by uid 40001, is a repository whose config
// points every key that can start a program at a marker script
// (gittooltest: hooks, fsmonitor, ssh and proxy commands, pager, editors,
// askpass, credential helpers, signing programs, protocols, filters and
// textconv named by .gitattributes, …), and a partial clone whose promisor
// remote is an ssh:// URL reached through core.sshCommand. The owner
// commits; moves HEAD's branch to a commit read from a pack (the daemon
// reads its subject with git), then to a commit the repository lacks (a
// lazy fetch would run the ssh command as root), and back; edits a file,
// throws the edit away with `git checkout -- .`; the daemon snapshots all
// along and restores the edit. No marker script ever runs. git runs on the
// repository as its owner (the daemon's worker for that owner, and git
// with the owner's credentials), so git finds nothing dubious in it and
// the work-lost check finds the edit thrown away. Restarted with a git that says it is 2.39.3 (before GIT_NO_LAZY_FETCH),
// the daemon does not run git on the partial clone at all, and status
// says why for the work-lost checks and the commits.
func TestGitIsAToolAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon as root over another user's workdir needs root")
	}
	t.Parallel()
	ctx := context.Background()
	w, work := snapshotWorkspace(t, "")
	if err := os.Chmod(w.dir, 0o755); err != nil { // the owner reaches the workdir
		t.Fatal(err)
	}
	h := gittooltest.New(t, work)
	missing := h.MakePartialClone(t)
	os.Remove(filepath.Join(work, ".git", "refs", "heads", "lazy")) // the owner points it later
	chownAll(t, work, daemonID)
	tool, err := gittool.Find(ctx, "")
	if err != nil {
		t.Skip(err)
	}
	// The owner's own git, as uid 40001: the daemon's settings (and no
	// filter) keep the owner's commands from leaving markers themselves,
	// so any marker is the daemon's doing.
	owner := tool.As(&gittool.Credential{UID: daemonID, GID: daemonID})
	ownerGit := func(args ...string) string {
		t.Helper()
		cmd := owner.Command(ctx, gittool.Run{Args: args, Dir: work, Config: gittooltest.Tame(),
			Env: []string{"GIT_AUTHOR_NAME=owner", "GIT_AUTHOR_EMAIL=o@example.invalid", "GIT_COMMITTER_NAME=owner", "GIT_COMMITTER_EMAIL=o@example.invalid"}})
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the owner's git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ownerWrite := func(rel, content string) {
		t.Helper()
		writeFile(t, work, rel, content)
		if err := os.Chown(filepath.Join(work, rel), daemonID, daemonID); err != nil {
			t.Fatal(err)
		}
	}
	noMarker := func(when string) {
		t.Helper()
		if f := h.Fired(); len(f) > 0 {
			t.Fatalf("%s: the repository's programs ran: %v", when, f)
		}
	}
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()
	agentDir := filepath.Join(w.state, "agents", "builder")
	resume := func() map[string]any { return get(t, c, "/v1/continuity?peek=1&local=1") }
	status := func() string { _, out, _ := cli(t, env, "", "status"); return out }
	degraded := func(r map[string]any) []any { d, _ := r["degraded"].([]any); return d }

	// git runs on the repository as its owner: nothing dubious, work lost
	// runs.
	var st string

	// A commit.
	ownerWrite("c.txt", "the owner's work\n")
	ownerGit("add", "c.txt")
	ownerGit("commit", "-q", "-m", "the owner's commit")
	waitUntil(t, func() string { return fmt.Sprintf("receipts %v", resume()["receipts"]) }, func() bool {
		return strings.Contains(fmt.Sprint(resume()["receipts"]), "the owner's commit")
	})
	head := ownerGit("rev-parse", "HEAD")

	// HEAD's branch moved to a commit in a pack: its subject is read with git.
	ownerGit("gc", "-q")
	side := ownerGit("rev-parse", "side")
	if _, err := os.Stat(filepath.Join(work, ".git", "objects", side[:2], side[2:])); err == nil {
		t.Fatal("gc left side's commit loose: git does not read it")
	}
	// movesTo waits for the n-th head move to sha (since_last_visit lists
	// them all: the tests peek) and returns its summary.
	movesTo := func(sha string, n int) string {
		t.Helper()
		var moves []any
		var found []string
		waitUntil(t, func() string { return fmt.Sprintf("head moves %v; log:\n%s", moves, p.stderr) }, func() bool {
			slv, _ := resume()["since_last_visit"].(map[string]any)
			moves, _ = slv["head"].([]any)
			found = nil
			for _, m := range moves {
				if m := m.(map[string]any); m["to"] == sha[:12] {
					found = append(found, m["summary"].(string))
				}
			}
			return len(found) >= n
		})
		return found[n-1]
	}
	ownerWrite(".git/refs/heads/main", side+"\n")
	if sum := movesTo(side, 1); !strings.Contains(sum, "on side") {
		t.Fatalf("the move to a packed commit: %q, want its subject", sum)
	}
	noMarker("a packed commit's subject")

	// A branch, then HEAD's, at a commit the partial clone lacks: git
	// would fetch it through the ssh command.
	ownerWrite(".git/refs/heads/lazy", missing+"\n")
	ownerWrite(".git/refs/heads/main", missing+"\n")
	movesTo(missing, 1)
	ownerWrite(".git/refs/heads/main", head+"\n")
	if sum := movesTo(head, 1); !strings.Contains(sum, "the owner's commit") {
		t.Fatalf("the move back: %q", sum)
	}
	noMarker("a missing commit")

	// Snapshots, and a work-lost check: an edit thrown away by checkout.
	ownerWrite("a.txt", "an uncommitted edit\n")
	held := waitWork(t, agentDir, time.Minute, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && workFile(wk, "a.txt") != nil
	}).Work.Snapshot.ID
	ownerGit("checkout", "--", ".")
	waitWork(t, agentDir, time.Minute, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && wk.Snapshot.ID != held && workFile(wk, "a.txt") != nil
	})
	waitUntil(t, func() string { return fmt.Sprintf("work lost %v; log:\n%s", resume()["work_lost"], p.stderr) }, func() bool {
		return strings.Contains(fmt.Sprint(resume()["work_lost"]), "a.txt")
	})
	if st := status(); strings.Contains(st, "dubious ownership") || !strings.Contains(st, "work_lost    ok") {
		t.Fatalf("status after the check:\n%s", st)
	}
	if d := degraded(resume()); slices.Contains(d, any("work_lost")) {
		t.Fatalf("resume's degraded = %v", d)
	}

	// A restore of the edit, as root: the file is the owner's again.
	if code, ans := restore(t, c, held, map[string]any{"paths": []string{"a.txt"}}); code != 200 {
		t.Fatalf("restore: %d %v", code, ans)
	}
	if got := readFile(t, work, "a.txt"); got != "an uncommitted edit\n" {
		t.Fatalf("a.txt restored = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(work, "a.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != daemonID {
		t.Fatalf("a.txt after the restore: %v %v", fi, err)
	}
	if code, out, errOut := cli(t, env, "", "snapshot", "diff"); code != 0 {
		t.Fatalf("snapshot diff: %d %s %s", code, out, errOut)
	}
	noMarker("snapshots, the work-lost check and the restore")
	p.terminate(t)

	// With a git too old to be kept from fetching, the partial clone is
	// not run on at all, and status says so.
	old := gittooltest.OldGit(t, "2.39.3")
	p = startProc(t, w.socket, []string{"PATH=" + old + ":" + os.Getenv("PATH")}, "run", "--config", w.config)
	c = p.client()
	defer c.CloseIdleConnections()
	waitUntil(t, func() string { return fmt.Sprintf("status:\n%s\nlog:\n%s", st, p.stderr) }, func() bool {
		st = status()
		return strings.Contains(st, "uncommitted work that vanishes is not found: worklost: git is not run on this repository: it is a partial clone") &&
			strings.Contains(st, "commits read from packs are reported without their subject") && strings.Contains(st, "git 2.39.3")
	})
	if d := degraded(resume()); !slices.Contains(d, any("work_lost")) || !slices.Contains(d, any("commits")) {
		t.Fatalf("resume's degraded = %v", d)
	}
	if !strings.Contains(p.stderr.String(), "git is not run on this repository") {
		t.Fatalf("no WARN naming the refusal:\n%s", p.stderr)
	}
	ownerWrite(".git/refs/heads/main", side+"\n")
	if sum := movesTo(side, 2); strings.Contains(sum, "on side") { // reported, without the packed commit's subject
		t.Fatalf("with git not run on the repository, the move to a packed commit has its subject: %q", sum)
	}
	ownerWrite(".git/refs/heads/main", head+"\n")
	ownerWrite("b.txt", "more work\n")
	waitWork(t, agentDir, time.Minute, func(wk *capsule.Work) bool { return wk.Snapshot != nil && workFile(wk, "b.txt") != nil })
	noMarker("with an old git")
}

// chownAll gives everything under dir to uid (and the group of that id).
func chownAll(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}
