package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// lossFeed reads the agent's wait feed from a cursor on.
type lossFeed struct {
	t      *testing.T
	c      *http.Client
	cursor uint64
}

// workLost returns the work_lost events published since the last call.
func (f *lossFeed) workLost() []capsule.WorkLost {
	f.t.Helper()
	resp, err := f.c.Get(fmt.Sprintf("http://d/v1/continuity/wait?max_seconds=1&after=%d", f.cursor))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Events []struct {
			Kind string           `json:"kind"`
			Data capsule.WorkLost `json:"data"`
		} `json:"events"`
		Cursor uint64 `json:"cursor"`
		Missed uint64 `json:"missed"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 {
		f.t.Fatalf("wait: %d %v", resp.StatusCode, err)
	}
	if ans.Missed > 0 {
		f.t.Fatalf("the wait feed dropped %d events", ans.Missed)
	}
	f.cursor = ans.Cursor
	var out []capsule.WorkLost
	for _, e := range ans.Events {
		if e.Kind == "work_lost" {
			out = append(out, e.Data)
		}
	}
	return out
}

// resumeWorkLost is the resume's work_lost list.
func resumeWorkLost(t *testing.T, c *http.Client) []capsule.WorkLost {
	t.Helper()
	resp, err := c.Get("http://d/v1/continuity?peek=1&local=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r capsule.Resume
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.WorkLost
}

// TestWorkLost: a real daemon on a real repository, real fsnotify. An
// uncommitted change a snapshot holds, thrown away by `git checkout -- .`,
// `git reset --hard`, `git stash` or `rm`, gives exactly one work_lost (on
// the wait feed, in resume, first in the markdown resume and the
// SessionStart context, in the log and the metric) whose restore command,
// run through the CLI, brings the work back (and the entry goes; a
// checkpoint of the agent's after it takes it off resume too). A
// restore by the daemon, and a commit followed by a branch switch, give
// none.
func TestWorkLost(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	writeFile(t, work, "a.go", "a0\n")
	writeFile(t, work, "b.go", "b0\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")
	userGit(t, work, "branch", "other")

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()
	agentDir := filepath.Join(w.state, "agents", "builder")
	feed := &lossFeed{t: t, c: c}
	feed.workLost()

	// snapshotHolds waits for a work record whose snapshot is new and has
	// each file as want says ("" : deleted); its check for lost work is
	// done by then (the check runs with the snapshot, before the record).
	seen := map[string]bool{}
	snapshotHolds := func(when string, want map[string]string) string {
		t.Helper()
		rec := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
			if wk.Snapshot == nil || seen[wk.Snapshot.ID] {
				return false
			}
			for path, content := range want {
				f := workFile(wk, path)
				if f == nil || (content == "") != (f.Status == "deleted") {
					return false
				}
			}
			return true
		})
		id := rec.Work.Snapshot.ID
		seen[id] = true
		for path, content := range want {
			got, err := os.ReadFile(filepath.Join(work, path))
			if content != "" && string(got) != content || content == "" && err == nil {
				t.Fatalf("%s: %s is %q (%v), want %q", when, path, got, err, content)
			}
		}
		return id
	}
	// oneLoss waits for the loss and checks it is the only one.
	oneLoss := func(when, snap string, paths ...string) capsule.WorkLost {
		t.Helper()
		var got []capsule.WorkLost
		waitUntil(t, func() string { return fmt.Sprintf("%s: work_lost events %+v; log:\n%s", when, got, p.stderr) },
			func() bool { got = append(got, feed.workLost()...); return len(got) > 0 })
		if len(got) != 1 || got[0].Snapshot != snap || !slices.Equal(got[0].Paths, paths) {
			t.Fatalf("%s: work_lost %+v, want one from %s naming %v", when, got, snap, paths)
		}
		if r := resumeWorkLost(t, c); len(r) != 1 || r[0].Restore != got[0].Restore {
			t.Fatalf("%s: resume's work_lost %+v, want %+v", when, r, got[0])
		}
		// The snapshot that saw the loss has its work record too: it is
		// not the one that brings the work back.
		rec := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
			if wk.Snapshot == nil || seen[wk.Snapshot.ID] {
				return false
			}
			for _, path := range paths {
				if workFile(wk, path) == nil {
					return false
				}
			}
			return true
		})
		seen[rec.Work.Snapshot.ID] = true
		return got[0]
	}
	// bringBack runs the loss's restore command through the CLI; the work
	// is back, the resume's entry goes, and no other loss came.
	bringBack := func(when string, l capsule.WorkLost, want map[string]string) {
		t.Helper()
		args := strings.Fields(l.Restore)
		if len(args) < 4 || args[0] != "continuityd" {
			t.Fatalf("%s: restore command %q", when, l.Restore)
		}
		if code, out, errOut := cli(t, env, "", args[1:]...); code != 0 {
			t.Fatalf("%s: %s: exit %d %s %s", when, l.Restore, code, out, errOut)
		}
		for path, content := range want {
			if got := readFile(t, work, path); got != content {
				t.Fatalf("%s: after %s, %s is %q, want %q", when, l.Restore, path, got, content)
			}
		}
		snapshotHolds(when+", brought back", want)
		if more := feed.workLost(); len(more) > 0 {
			t.Fatalf("%s: the daemon's restore counted as lost work: %+v", when, more)
		}
		if r := resumeWorkLost(t, c); len(r) != 0 {
			t.Fatalf("%s: the work is back, resume still lists %+v", when, r)
		}
	}

	// git checkout -- .
	writeFile(t, work, "a.go", "a-checkout\n")
	s := snapshotHolds("edit a.go", map[string]string{"a.go": "a-checkout\n"})
	userGit(t, work, "checkout", "--", ".")
	l := oneLoss("git checkout -- .", s, "a.go")
	// First in the markdown resume and in the SessionStart context.
	code, md, _ := cli(t, env, "", "resume")
	if code != 0 || !strings.HasPrefix(strings.SplitN(md, "\n## ", 2)[1], "Work lost\n") || !strings.Contains(md, l.Restore) {
		t.Fatalf("markdown resume (exit %d):\n%s", code, md)
	}
	if ctx := hookContext(t, env, work); !strings.HasPrefix(strings.SplitN(ctx, "\n## ", 2)[1], "Work lost\n") {
		t.Fatalf("SessionStart context:\n%s", ctx)
	}
	if !strings.Contains(p.stderr.String(), "uncommitted work vanished") || !strings.Contains(p.stderr.String(), l.Restore) {
		t.Fatalf("no WARN line naming the restore command:\n%s", p.stderr)
	}
	bringBack("git checkout -- .", l, map[string]string{"a.go": "a-checkout\n"})

	// git reset --hard: a modified file and a new one staged.
	writeFile(t, work, "b.go", "b-reset\n")
	writeFile(t, work, "c.go", "c-new\n")
	userGit(t, work, "add", "c.go")
	s = snapshotHolds("edit b.go, add c.go", map[string]string{"b.go": "b-reset\n", "c.go": "c-new\n"})
	userGit(t, work, "reset", "-q", "--hard")
	l = oneLoss("git reset --hard", s, "a.go", "b.go", "c.go")
	bringBack("git reset --hard", l, map[string]string{"a.go": "a-checkout\n", "b.go": "b-reset\n", "c.go": "c-new\n"})

	// git stash (the work is in the stash too, but not in a commit of the branch).
	writeFile(t, work, "a.go", "a-stash\n")
	s = snapshotHolds("edit a.go again", map[string]string{"a.go": "a-stash\n"})
	userGit(t, work, "stash", "-q")
	l = oneLoss("git stash", s, "a.go", "b.go")
	// The agent checkpoints after it was told: resume no longer lists it
	// (the command still brings the work back).
	if code, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "told of the stash"}); code != 200 {
		t.Fatalf("checkpoint: %d %v %v", code, m, err)
	}
	if r := resumeWorkLost(t, c); len(r) != 0 {
		t.Fatalf("after a checkpoint, resume still lists %+v", r)
	}
	bringBack("git stash", l, map[string]string{"a.go": "a-stash\n", "b.go": "b-reset\n"})

	// rm of a file no commit holds.
	writeFile(t, work, "d.go", "d-new\n")
	s = snapshotHolds("add d.go", map[string]string{"d.go": "d-new\n"})
	os.Remove(filepath.Join(work, "d.go"))
	l = oneLoss("rm d.go", s, "d.go")
	bringBack("rm d.go", l, map[string]string{"d.go": "d-new\n"})

	// A restore by the daemon that takes uncommitted work away is no loss.
	writeFile(t, work, "e.go", "e-new\n")
	snapshotHolds("add e.go", map[string]string{"e.go": "e-new\n"})
	if code, m := restore(t, c, l.Snapshot, map[string]any{"paths": []string{"e.go"}}); code != 200 {
		t.Fatalf("daemon restore: %d %v", code, m)
	}
	snapshotHolds("the daemon's restore took e.go away", map[string]string{"e.go": ""})
	if got := feed.workLost(); len(got) != 0 {
		t.Fatalf("a daemon restore counted as lost work: %+v", got)
	}

	// A commit holds the work: switching branches after it loses nothing.
	userGit(t, work, "commit", "-q", "-am", "the work")
	waitUntil(t, func() string { return "the commit's receipt in resume; log:\n" + p.stderr.String() }, func() bool {
		return strings.Contains(fmt.Sprint(get(t, c, "/v1/continuity?peek=1&local=1")["receipts"]), "the work")
	})
	userGit(t, work, "checkout", "-q", "other")
	snapshotHolds("switched to branch other", map[string]string{"a.go": "a0\n", "b.go": "b0\n"})
	if got := feed.workLost(); len(got) != 0 {
		t.Fatalf("a commit then a branch switch counted as lost work: %+v", got)
	}
	if r := resumeWorkLost(t, c); len(r) != 0 {
		t.Fatalf("resume's work_lost: %+v", r)
	}
	resp, err := c.Get("http://d/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var metrics strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		metrics.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(metrics.String(), `continuityd_work_lost_total{agent="builder"} 4`) {
		t.Errorf("metrics:\n%s", metrics.String())
	}
}

// TestWorkLostWhileTheDaemonWasDown: uncommitted work a snapshot holds,
// thrown away while the daemon was killed, is found by the first snapshot
// of the next run (one work_lost, whose command brings it back), and a
// loss found before a restart is still listed after it.
func TestWorkLostWhileTheDaemonWasDown(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	writeFile(t, work, "a.go", "a0\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")
	agentDir := filepath.Join(w.state, "agents", "builder")

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	writeFile(t, work, "a.go", "an hour of work\n")
	held := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && workFile(wk, "a.go") != nil
	}).Work.Snapshot.ID
	p.kill()
	userGit(t, work, "checkout", "--", ".")

	for run := range 2 {
		p = startProc(t, w.socket, nil, "run", "--config", w.config)
		c := p.client()
		var got []capsule.WorkLost
		waitUntil(t, func() string { return fmt.Sprintf("run %d: resume's work_lost %+v; log:\n%s", run, got, p.stderr) },
			func() bool { got = resumeWorkLost(t, c); return len(got) > 0 })
		feed := &lossFeed{t: t, c: c}
		if len(got) != 1 || got[0].Snapshot != held || !slices.Equal(got[0].Paths, []string{"a.go"}) {
			t.Fatalf("run %d: work_lost %+v, want one from %s naming a.go", run, got, held)
		}
		if ev := feed.workLost(); run == 0 && len(ev) != 1 || run == 1 && len(ev) != 0 {
			t.Fatalf("run %d: work_lost events %+v (found at the first start only)", run, ev)
		}
		c.CloseIdleConnections()
		if run == 0 {
			p.kill()
		}
	}
	args := strings.Fields(resumeWorkLost(t, p.client())[0].Restore)
	if code, out, errOut := cli(t, env, "", args[1:]...); code != 0 || readFile(t, work, "a.go") != "an hour of work\n" {
		t.Fatalf("%v: exit %d %s %s; a.go %q", args, code, out, errOut, readFile(t, work, "a.go"))
	}
}
