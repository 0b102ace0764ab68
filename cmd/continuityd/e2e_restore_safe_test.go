//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	store := filepath.Join(w.state, "agents", "builder", "snapshots.git")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	restoreTree(t, work, 1)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	v1 := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]
	restoreTree(t, work, 2)
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

	for _, point := range []string{"before-first", "after-7", "after-last"} {
		before := treeFiles(t, work) // version 2
		fifo := filepath.Join(t.TempDir(), "hold")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
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
// nothing in either directory changes; status shows why.
func TestRestoreRefusedWhenTheWorkdirLinkMoved(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	a, b, link := filepath.Join(w.dir, "a"), filepath.Join(w.dir, "b"), filepath.Join(w.dir, "link")
	writeFile(t, a, "f.txt", "a's file\n")
	writeFile(t, b, "f.txt", "b's file\n")
	writeFile(t, b, "b-only.txt", "b's other file\n")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n", w.state, w.socket, link)
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	s := waitSnapshots(t, p, 1, time.Minute, "the start snapshot")[0]

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
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
