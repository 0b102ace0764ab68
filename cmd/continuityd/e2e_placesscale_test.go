//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/holdgit"
	"github.com/continuityd/continuityd/internal/testkit/sourcetree"
)

// scaleHome is a daemon of places under home, run as the test's user with
// a config of its own, and the hook command as an agent runs it.
type scaleHome struct {
	top, home, config, sock string
	env                     []string
}

func newScaleHome(t *testing.T, extraEnv ...string) *scaleHome {
	t.Helper()
	top := t.TempDir()
	h := &scaleHome{top: top, home: filepath.Join(top, "home"), config: filepath.Join(top, "continuityd.toml"), sock: filepath.Join(top, "d.sock")}
	if err := os.MkdirAll(h.home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\n\n[places]\nroots = [%q]\n\n[policy]\nquiet = \"100ms\"\n",
		filepath.Join(top, "state"), h.sock, h.home)
	if err := os.WriteFile(h.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = append([]string{"HOME=" + h.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"CONTINUITYD_SOCKET=" + h.sock, "XDG_CONFIG_HOME=", "XDG_STATE_HOME="}, extraEnv...)
	return h
}

func (h *scaleHome) start(t *testing.T) *proc {
	t.Helper()
	return startProcWith(t, func(c *exec.Cmd) { c.Dir = h.home }, h.sock, h.env, "run", "--config", h.config)
}

// session sends a Claude Code SessionStart from dir through the hook
// command and returns what the agent is told.
func (h *scaleHome) session(t *testing.T, dir, id string) string {
	t.Helper()
	cmd := exec.Command(binary, "hook")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, append(os.Environ(), h.env...), strings.NewReader(claudeSessionStart(t, dir, "", id))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the hook in %s: %v", dir, err)
	}
	return sessionContext(t, string(out))
}

// TestPlaceLargeAdoptionAnswersBeforeItsSnapshot: a session in a
// 20,000-file project adopts it, and the hook answers while the place's
// start snapshot is still under way (held in its `git ls-files` by a
// test git, so the answer cannot have waited for it), with its progress
// in status; released, the snapshot holds every file.
func TestPlaceLargeAdoptionAnswersBeforeItsSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 20,000-file tree")
	}
	g := holdgit.New(t)
	h := newScaleHome(t, "PATH="+g.Dir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	proj := filepath.Join(h.home, "large")
	// The held git, not the tree's size, keeps the snapshot under way
	// (BenchmarkPlaceAdoptLarge times 100,000 files): a tree this size
	// only makes the walk long enough to be seen in status.
	const files = 20_000
	sourcetree.Write(t, proj, files, 64)
	p := h.start(t)
	c := p.client()
	defer c.CloseIdleConnections()
	g.Arm(t, "ls-files")
	if ctx := h.session(t, proj, "s-large"); !strings.Contains(ctx, "# Where large was") {
		t.Fatalf("the adopting session was told %q; log:\n%s", ctx, p.stderr)
	}
	// The answer is in; the start snapshot has not got past its list of
	// files, and status says where it stands.
	g.WaitHeld(t, 10*time.Minute, func() string { return "log:\n" + p.stderr.String() })
	detail := component(t, c, "large", "snapshots")
	if !strings.Contains(detail, "taking the start snapshot") {
		t.Errorf("the snapshots part while the start snapshot is held: %q", detail)
	}
	if ids := agentSnapshots(t, c, "large"); len(ids) != 0 {
		t.Errorf("snapshots before the start snapshot was let go: %v", ids)
	}
	g.Release(t)
	// The snapshot is listed a moment before the log and status say it
	// is taken: wait for the line, then for status.
	benchUntil(t, func() string { return "the start snapshot's line; log:\n" + p.stderr.String() },
		func() bool { return tookRE.MatchString(p.stderr.String()) })
	if took := tookRE.FindStringSubmatch(p.stderr.String()); !strings.Contains(took[0], fmt.Sprintf("files=%d", files)) {
		t.Errorf("the start snapshot's line: %q", took[0])
	}
	if ids := agentSnapshots(t, c, "large"); len(ids) != 1 {
		t.Errorf("snapshots once the start snapshot is taken: %v, want one", ids)
	}
	detail = ""
	waitUntil(t, func() string { return fmt.Sprintf("the snapshots part once the start snapshot is taken: %q", detail) },
		func() bool {
			detail = component(t, c, "large", "snapshots")
			return !strings.Contains(detail, "start snapshot")
		})
}

// TestPlacesWatchedAgainAfterARestart: the places a session reported
// from are opened once the restarted daemon serves, and what changed in
// one of them while the daemon was down is reported as outside and
// snapshotted: serving first misses nothing.
func TestPlacesWatchedAgainAfterARestart(t *testing.T) {
	h := newScaleHome(t)
	names := []string{"alpha", "beta", "gamma"}
	for _, n := range names {
		writeFile(t, filepath.Join(h.home, n), "notes.md", "first of "+n+"\n")
	}
	p := h.start(t)
	c := p.client()
	for _, n := range names {
		if ctx := h.session(t, filepath.Join(h.home, n), "s-"+n); !strings.Contains(ctx, "# Where "+n+" was") {
			t.Fatalf("%s's session was told %q", n, ctx)
		}
	}
	before := map[string][]string{}
	for _, n := range names {
		waitUntil(t, func() string { return n + "'s start snapshot; log:\n" + p.stderr.String() },
			func() bool { before[n] = agentSnapshots(t, c, n); return len(before[n]) == 1 })
	}
	c.CloseIdleConnections()
	if code := p.terminate(t); code != 0 {
		t.Fatalf("the daemon stopped with %d: %s", code, p.stderr)
	}
	// While no daemon runs.
	writeFile(t, filepath.Join(h.home, "beta"), "notes.md", "changed while the daemon was down\n")
	writeFile(t, filepath.Join(h.home, "beta"), "added.md", "new while the daemon was down\n")

	p = h.start(t)
	c = p.client()
	defer c.CloseIdleConnections()
	waitUntil(t, func() string { return "the places watched again; log:\n" + p.stderr.String() }, func() bool {
		for _, n := range names {
			if st := placeStatus(t, p, n); st == nil || st["watched"] != true {
				return false
			}
		}
		return true
	})
	var got []string
	waitUntil(t, func() string { return fmt.Sprintf("beta's by_others %v; log:\n%s", got, p.stderr) }, func() bool {
		got = byOthers(t, c, "beta")
		return hasAll(got, "notes.md outside", "added.md outside")
	})
	var now []string
	waitUntil(t, func() string { return fmt.Sprintf("beta's snapshot of the changes: %v after %v", now, before["beta"]) },
		func() bool { now = agentSnapshots(t, c, "beta"); return len(now) == 2 })
	for _, n := range []string{"alpha", "gamma"} {
		if ids := agentSnapshots(t, c, n); len(ids) != 1 {
			t.Errorf("%s, unchanged, has snapshots %v after the restart, want its one", n, ids)
		}
		if got := byOthers(t, c, n); len(got) != 0 {
			t.Errorf("%s, unchanged, reports %v", n, got)
		}
	}
	if !strings.Contains(p.stderr.String(), `msg="places watched again"`) {
		t.Errorf("no line on the places watched again; log:\n%s", p.stderr)
	}
}
