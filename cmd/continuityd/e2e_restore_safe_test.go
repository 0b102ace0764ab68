//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/daemon/snapshot"
)

// restoreTree writes version v of the kill test's tree into work: 60
// files in three directories; version 2 edits most of version 1's, drops
// a third of them and adds others.
func restoreTree(t *testing.T, work string, v int) {
	t.Helper()
	os.RemoveAll(filepath.Join(work, "t"))
	for i := range 60 {
		if v == 2 && i%3 == 0 {
			continue
		}
		writeFile(t, work, fmt.Sprintf("t/d%d/f%02d.txt", i%3, i), fmt.Sprintf("version %d of file %d\n", v, i))
	}
	if v == 2 {
		for i := range 10 {
			writeFile(t, work, fmt.Sprintf("t/new/n%02d.txt", i), fmt.Sprintf("new in version 2: %d\n", i))
		}
	}
}

// treeFiles maps each file under work/t to its content.
func treeFiles(t *testing.T, work string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(filepath.Join(work, "t"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(work, p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// agentStatus is `GET /v1/status`'s one agent.
func agentStatus(t *testing.T, p *proc) map[string]any {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	agents, _ := get(t, c, "/v1/status")["agents"].([]any)
	if len(agents) != 1 {
		t.Fatalf("status lists %d agents", len(agents))
	}
	return agents[0].(map[string]any)
}

// TestRestoreKilledMidWayIsFinished: a whole restore (`continuityd
// snapshot restore ID --all`) is held by the test hook before its first
// file, after some files, and after its last file (its journal still
// there), and the daemon is killed there with SIGKILL. At the restart the
// restore is finished (the tree is the snapshot's) and reported with its
// safety snapshot and the command that undoes it: in status (JSON and
// text), in resume (JSON and markdown) and as a WARN in the log; what it
// changed is not taken for lost work. The reported command, run as is,
// brings the tree back as it was before the restore, and that successful
// restore ends the report.
func TestRestoreKilledMidWayIsFinished(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts the daemon three times")
	}
	w, work := snapshotWorkspace(t, "")
	killedRestore(t, w, work, "", nil, []string{"before-first", "after-7", "after-last"})
}

// TestRootRestoreKilledInTheOwnersWorker is the same, once, with the
// daemon as root over a workdir uid 40001 owns: the restore runs in the
// owner's worker (which the kill ends too), and what the store found at
// the restart reaches status, resume and the log through it.
func TestRootRestoreKilledInTheOwnersWorker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts the daemon")
	}
	top := usersTop(t, "cdkill", "work", "hold")
	w := &workspace{dir: top, config: filepath.Join(top, "continuityd.toml"), socket: filepath.Join(top, "d.sock"), state: filepath.Join(top, "state")}
	work := filepath.Join(top, "work")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n",
		w.state, w.socket, work)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	owned := func() {
		if err := filepath.WalkDir(work, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, daemonID, daemonID)
		}); err != nil {
			t.Fatal(err)
		}
	}
	killedRestore(t, w, work, filepath.Join(top, "hold"), owned, []string{"after-7"})
}

// killedRestore is the restore-kill test at points, with the workdir's
// files given to their owner by owned (nil: nothing to do) after the test
// writes them, and the test hook's pipe in holdDir ("": a temporary
// directory).
func killedRestore(t *testing.T, w *workspace, work, holdDir string, owned func(), points []string) {
	t.Helper()
	if owned == nil {
		owned = func() {}
	}
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	restoreTree(t, work, 1)
	owned()
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	v1 := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]
	store := filepath.Join(w.state, "agents", "builder", "snapshots.git")
	if owners, _ := filepath.Glob(filepath.Join(w.state, "owners", "*", "builder-*", "snapshots.git")); len(owners) == 1 {
		store = owners[0] // the owner's, in root mode
	} else if holdDir != "" {
		t.Fatalf("no store of the owner's (%v): the restores would not run in the owner's worker", owners)
	}
	restoreTree(t, work, 2)
	owned()
	waitUntil(t, func() string { return "no snapshot of version 2; log:\n" + p.stderr.String() }, func() bool {
		ids := listedSnapshots(t, p)
		return len(ids) > 1 && storeGit(t, store, "ls-tree", "-r", "--name-only", ids[0], "t/new") != ""
	})
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	v1Tree := storeGit(t, store, "rev-parse", v1+"^{tree}")
	want1 := map[string]string{}
	for _, name := range strings.Split(storeGit(t, store, "ls-tree", "-r", "--name-only", v1, "t"), "\n") {
		want1[name] = storeGit(t, store, "cat-file", "blob", v1+":"+name) + "\n"
	}

	for _, point := range points {
		before := treeFiles(t, work) // version 2
		dir := holdDir
		if dir == "" {
			dir = t.TempDir()
		}
		fifo := filepath.Join(dir, "hold-"+point)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if holdDir != "" {
			if err := os.Chown(fifo, daemonID, daemonID); err != nil {
				t.Fatal(err)
			}
		}
		p = startProc(t, w.socket, []string{snapshot.HoldRestoreEnv + "=" + point + " " + fifo}, "run", "--config", w.config)
		client := exec.Command(binary, "snapshot", "restore", v1, "--all")
		client.Env = append(os.Environ(), env...)
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() string { return point + ": the restore did not reach its point; log:\n" + p.stderr.String() }, func() bool {
			_, err := os.Stat(fifo + ".held")
			return err == nil
		})
		p.kill()
		client.Wait() // it lost its daemon
		if _, err := os.Stat(filepath.Join(store, "restore.journal")); err != nil {
			t.Fatalf("%s: killed mid-restore, no journal: %v", point, err)
		}

		p = startProc(t, w.socket, nil, "run", "--config", w.config)
		if got := treeFiles(t, work); !sameFiles(got, want1) {
			t.Fatalf("%s: after the restart the tree is not snapshot %s: %v", point, v1[:12], got)
		}
		st := agentStatus(t, p)
		ri, _ := st["restore_interrupted"].(map[string]any)
		safety, _ := ri["safety"].(string)
		undo, _ := ri["undo"].(string)
		if ri == nil || ri["finished"] != true || ri["snapshot"] != v1 || safety == "" || undo != "continuityd snapshot restore "+safety+" --agent builder --all" {
			t.Fatalf("%s: status says %v", point, st["restore_interrupted"])
		}
		// Once the newest snapshot holds the finished tree (the start
		// snapshot after the finish, or the finish's safety snapshot when
		// the finish had nothing left to do) and is checked for lost work,
		// none is found in what the restore removed (t/new/).
		waitUntil(t, func() string {
			return point + ": the start snapshot was not checked for lost work; log:\n" + p.stderr.String()
		}, func() bool {
			ids := listedSnapshots(t, p)
			raw, _ := os.ReadFile(filepath.Join(w.state, "agents", "builder", "worklost.json"))
			var kept struct {
				Last struct{ Snapshot string } `json:"last"`
			}
			json.Unmarshal(raw, &kept)
			return len(ids) > 0 && kept.Last.Snapshot == ids[0] &&
				storeGit(t, store, "rev-parse", ids[0]+"^{tree}") == v1Tree
		})
		c := p.client()
		res := get(t, c, "/v1/continuity?peek=1")
		c.CloseIdleConnections()
		if rr, _ := res["restore_interrupted"].(map[string]any); rr == nil || rr["safety"] != safety || rr["undo"] != undo {
			t.Fatalf("%s: resume says %v", point, res["restore_interrupted"])
		}
		lost, _ := json.Marshal(res["work_lost"])
		if strings.Contains(string(lost), "t/new/") {
			t.Errorf("%s: what the finished restore removed is reported as lost work: %s", point, lost)
		}
		code, md, errOut := cli(t, env, "", "resume", "--peek")
		if code != 0 || !strings.Contains(md, "## Restore interrupted") || !strings.Contains(md, "finished it") || !strings.Contains(md, "`"+undo+"`") {
			t.Fatalf("%s: markdown resume (exit %d): %s%s", point, code, md, errOut)
		}
		code, out, _ := cli(t, env, "", "status")
		if code != 0 || !strings.Contains(out, "agent builder: a restore of snapshot "+v1[:12]) || !strings.Contains(out, undo) {
			t.Fatalf("%s: continuityd status (exit %d):\n%s", point, code, out)
		}
		if log := p.stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "a restore of the work tree was interrupted") || !strings.Contains(log, safety) {
			t.Fatalf("%s: the log does not warn of the interrupted restore with its safety snapshot:\n%s", point, log)
		}

		// The reported command undoes the restore, and ends the report.
		args := strings.Fields(undo)
		if code, out, errOut := cli(t, env, "", args[1:]...); code != 0 {
			t.Fatalf("%s: %s: exit %d: %s%s", point, undo, code, out, errOut)
		}
		if got := treeFiles(t, work); !sameFiles(got, before) {
			t.Fatalf("%s: %s did not bring back the tree as it was: %v", point, undo, got)
		}
		if st := agentStatus(t, p); st["restore_interrupted"] != nil {
			t.Fatalf("%s: still reported after a successful restore: %v", point, st["restore_interrupted"])
		}
		if code := p.terminate(t); code != 0 {
			t.Fatalf("%s: exit %d", point, code)
		}
	}
}

// TestRestoreRefusedWhenTheWorkdirLinkMoved: the agent's workdir is a
// symbolic link; repointed to another directory after the daemon started,
// a restore is refused, naming both directories and the way out, and
// nothing in either directory changes; status shows why. Then the same
// with the daemon as root over a workdir uid 40001 owns, where the
// store, in the owner's worker, refuses and says so through it.
func TestRestoreRefusedWhenTheWorkdirLinkMoved(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	linkMoved(t, w, nil)
	if os.Geteuid() == 0 {
		top := usersTop(t, "cdlink", "a", "b")
		owned := func(paths ...string) {
			for _, p := range paths {
				if err := os.Lchown(p, daemonID, daemonID); err != nil {
					t.Fatal(err)
				}
			}
		}
		linkMoved(t, &workspace{dir: top, config: filepath.Join(top, "continuityd.toml"), socket: filepath.Join(top, "d.sock"), state: filepath.Join(top, "state")}, owned)
	}
}

// linkMoved is TestRestoreRefusedWhenTheWorkdirLinkMoved in w, with the
// files it makes given to the workdir's owner by owned (nil: nothing to
// do).
func linkMoved(t *testing.T, w *workspace, owned func(paths ...string)) {
	t.Helper()
	rootMode := owned != nil
	if owned == nil {
		owned = func(...string) {}
	}
	a, b, link := filepath.Join(w.dir, "a"), filepath.Join(w.dir, "b"), filepath.Join(w.dir, "link")
	writeFile(t, a, "f.txt", "a's file\n")
	writeFile(t, b, "f.txt", "b's file\n")
	writeFile(t, b, "b-only.txt", "b's other file\n")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	owned(a, b, link, filepath.Join(a, "f.txt"), filepath.Join(b, "f.txt"), filepath.Join(b, "b-only.txt"))
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n", w.state, w.socket, link)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	s := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]
	if workers := workersOf(t, p.cmd.Process.Pid); rootMode && len(workers) != 1 {
		t.Fatalf("as root, the daemon's workers: %v, want the owner's", workers)
	}

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	owned(link)
	beforeA, beforeB := dirDigest(t, a), dirDigest(t, b)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	code, out, errOut := cli(t, env, "", "snapshot", "restore", s, "--all")
	if code != 1 || !strings.Contains(errOut, a) || !strings.Contains(errOut, b) || !strings.Contains(errOut, "restart the daemon") {
		t.Fatalf("restore after the workdir link moved: exit %d: %s%s", code, out, errOut)
	}
	if dirDigest(t, b) != beforeB || dirDigest(t, a) != beforeA {
		t.Fatal("a refused restore changed files")
	}
	st := agentStatus(t, p)
	if problem, _ := st["snapshot_problem"].(string); !strings.Contains(problem, b) {
		t.Fatalf("status: snapshot_problem %q", st["snapshot_problem"])
	}
	if raw, _ := json.Marshal(st["degraded"]); !strings.Contains(string(raw), "snapshots") {
		t.Fatalf("status: degraded %s", raw)
	}
	if code, out, _ := cli(t, env, "", "status"); code != 0 || !strings.Contains(out, "degraded [\"snapshots\"]: the workdir "+link+" now leads to "+b) ||
		!strings.Contains(out, "snapshots    degraded: the workdir") {
		t.Fatalf("continuityd status (exit %d):\n%s", code, out)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// swapEnv makes the test binary a child that swaps two names with
// renameat2(RENAME_EXCHANGE), as an unprivileged attacker would time it:
// whenever the first name's directory changes (a restore is writing or
// removing there), a burst of swapBurst swaps that leaves both names as
// they were (the next restore's safety snapshot then reads a whole tree),
// and the events the burst itself caused are dropped. A name the restore
// removed (the link, through a name that was the link then) is made
// again. It runs until its stdin ends and then prints how many swaps it
// made.
const swapEnv = "CONTINUITYD_TEST_SWAP"

const swapBurst = 4000 // even

func init() { children[swapEnv] = runSwapper }

func runSwapper() int {
	args := strings.Split(os.Getenv(swapEnv), "\n")
	a, b, target := args[0], args[1], args[2]
	var n atomic.Int64
	go func() {
		io.Copy(io.Discard, os.Stdin)
		fmt.Println(n.Load())
		os.Exit(0)
	}()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return fail(err)
	}
	if _, err := unix.InotifyAddWatch(in, a, unix.IN_CREATE|unix.IN_DELETE|unix.IN_ATTRIB|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		return fail(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := unix.Read(in, buf); err != nil {
			return fail(err)
		}
		for range swapBurst {
			err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
			if err == unix.ENOENT {
				missing := a
				if _, err := os.Lstat(b); err != nil {
					missing = b
				}
				err = os.Symlink(target, missing)
			}
			if err != nil {
				return fail(err)
			}
			n.Add(1)
		}
		if fi, err := os.Lstat(a); err == nil && !fi.IsDir() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				return fail(err)
			}
		}
		if err := unix.SetNonblock(in, true); err != nil {
			return fail(err)
		}
		for {
			if _, err := unix.Read(in, buf); err != nil {
				break
			}
		}
		if err := unix.SetNonblock(in, false); err != nil {
			return fail(err)
		}
	}
}

// TestRootRestoreRacingSymlinkSwaps: the daemon runs as root, the agent's
// workdir is uid 40001's, and that user swaps a directory of the workdir
// with a symbolic link to a root-owned 0700 directory outside it while
// the daemon restores (through its API) a snapshot that holds the
// directory's files (written and given to the workdir's owner) and one
// that lacks them (removed; the directory kept non-empty), for 10 s (the
// package test races 3,000 files for 30 s, the store as root itself).
// Nothing outside the workdir changes: the directory's files are all
// there, root's, 0600, as they were. (Here the restores run in the
// owner's worker, as the owner, behind the handles beneath the workdir.)
func TestRootRestoreRacingSymlinkSwaps(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("races restores for 10 s")
	}
	top := usersTop(t, "cdrace", "work")
	work, secret := filepath.Join(top, "work"), filepath.Join(top, "secret")
	const files = 300
	name := func(i int) string { return fmt.Sprintf("f%03d", i) }
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(secret, name(i)), []byte("root's "+name(i)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, work, "d/keep", "keep\n")
	for i := range files {
		writeFile(t, work, "d/"+name(i), "the user's "+name(i)+"\n")
	}
	if err := os.Symlink(secret, filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(work, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, daemonID, daemonID)
	}); err != nil {
		t.Fatal(err)
	}
	socket, config := filepath.Join(top, "d.sock"), filepath.Join(top, "continuityd.toml")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n",
		filepath.Join(top, "state"), socket, work)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, socket, nil, "run", "--config", config)
	with := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]
	for i := range files {
		if err := os.Remove(filepath.Join(work, "d", name(i))); err != nil {
			t.Fatal(err)
		}
	}
	var without string
	waitUntil(t, func() string { return "no snapshot without d/'s files; log:\n" + p.stderr.String() }, func() bool {
		c := p.client()
		defer c.CloseIdleConnections()
		list, _ := get(t, c, "/v1/snapshots")["snapshots"].([]any)
		for _, s := range list {
			if s := s.(map[string]any); s["deleted"] == float64(files) {
				without = s["id"].(string)
				return true
			}
		}
		return false
	})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "swapper")
	raw, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	swapper := exec.Command(bin, "-test.run=^$")
	swapper.Env = append(os.Environ(), swapEnv+"="+filepath.Join(work, "d")+"\n"+filepath.Join(work, "link")+"\n"+secret)
	swapper.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
	var swaps, swapErr strings.Builder
	swapper.Stdout, swapper.Stderr = &swaps, &swapErr
	stop, err := swapper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := swapper.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stopSwapper := func() {
		if !stopped {
			stopped = true
			stop.Close()
			if err := swapper.Wait(); err != nil {
				t.Errorf("the swapper failed: %v\n%s", err, swapErr.String())
			}
		}
	}
	defer stopSwapper()

	c := p.client()
	defer c.CloseIdleConnections()
	acted := map[string]int{}
	restores := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for _, id := range []string{with, without} {
			restores++
			code, m := restore(t, c, id, map[string]any{"all": true})
			if changes, _ := m["changes"].([]any); code == 200 && len(changes) > 0 {
				acted[id]++
			}
		}
	}
	stopSwapper()
	t.Logf("%d restores: %d wrote d/'s files, %d removed them; %s swaps", restores, acted[with], acted[without], strings.TrimSpace(swaps.String()))
	if acted[with] == 0 || acted[without] == 0 {
		t.Fatalf("the restores never got to write (%d) or remove (%d) d/'s files: the race was not run; log:\n%s", acted[with], acted[without], p.stderr.String())
	}
	var bad []string
	if fi, err := os.Lstat(secret); err != nil || fi.Mode() != os.ModeDir|0o700 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		bad = append(bad, fmt.Sprintf("the directory outside: %v %v", fi, err))
	}
	if ents, _ := os.ReadDir(secret); len(ents) != files {
		bad = append(bad, fmt.Sprintf("the directory outside holds %d files, had %d", len(ents), files))
	}
	for i := range files {
		p := filepath.Join(secret, name(i))
		fi, err := os.Lstat(p)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		b, _ := os.ReadFile(p)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode() != 0o600 || string(b) != "root's "+name(i)+"\n" {
			bad = append(bad, fmt.Sprintf("%s: now %v %d:%d %q", name(i), fi.Mode(), st.Uid, st.Gid, b))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("a root restore racing symlink swaps changed %d things outside the workdir:\n%s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
