//go:build linux

package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEmbeddedDefaultIsItsPlace runs the README's first command, `run` with
// no config, as an unprivileged user with a HOME and runtime directory of
// their own, first in one project, then in another, then in the first
// again: the second never shows or restores the first's focus or
// snapshots, and the first gets its own back.
func TestEmbeddedDefaultIsItsPlace(t *testing.T) {
	top, err := os.MkdirTemp("", "cdplace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	home, run := filepath.Join(top, "home"), filepath.Join(top, "run")
	projA, projB := filepath.Join(home, "projA"), filepath.Join(home, "projB")
	for _, d := range []string{home, run, projA, projB} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, projA, "a.txt", "project A\n")
	writeFile(t, projB, "b.txt", "project B\n")
	setup := func(dir string) func(*exec.Cmd) {
		return func(c *exec.Cmd) { c.Dir = dir }
	}
	if os.Geteuid() == 0 { // CI runs as root: be the unprivileged user the issue names
		for _, d := range []string{top, filepath.Dir(binary)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		filepath.Walk(top, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, daemonID, daemonID) })
		setup = func(dir string) func(*exec.Cmd) {
			return func(c *exec.Cmd) {
				c.Dir = dir
				c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
			}
		}
	}
	sock := filepath.Join(run, "continuityd", "continuityd.sock")
	env := []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + run, "XDG_STATE_HOME=", "CONTINUITYD_STATE_DIR=", "CONTINUITYD_SOCKET="}

	// Project A: a checkpoint and its first snapshot.
	p := startProcWith(t, setup(projA), sock, env, "run")
	c := p.client()
	if code, body, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "project A's focus"}); err != nil || code != 200 {
		t.Fatalf("checkpoint in A: %d %v %v", code, body, err)
	}
	idsA := waitSnapshots(t, p, 1, time.Minute, "the first snapshot in A")
	c.CloseIdleConnections()
	if code := p.terminate(t); code != 0 {
		t.Fatalf("A: exit %d: %s", code, p.stderr)
	}

	// Project B: nothing of A.
	p = startProcWith(t, setup(projB), sock, env, "run")
	c = p.client()
	res := get(t, c, "/v1/continuity?peek=1")
	if strings.Contains(mustJSON(t, res), "project A") {
		t.Fatalf("B's resume shows A's state: %v", res)
	}
	st := get(t, c, "/v1/status")
	if a := st["agents"].([]any)[0].(map[string]any); a["workdir"] != projB {
		t.Fatalf("B's agent works in %v", a["workdir"])
	}
	idsB := waitSnapshots(t, p, 1, time.Minute, "the first snapshot in B")
	for _, id := range idsA {
		if slices.Contains(idsB, id) {
			t.Fatalf("B lists A's snapshot %s: %v", id, idsB)
		}
		code, body, err := post(c, "/v1/snapshots/"+id+"/restore", map[string]any{"dry_run": true, "all": true})
		if err != nil || code == 200 {
			t.Fatalf("B would restore A's snapshot %s: %d %v %v", id, code, body, err)
		}
	}
	if _, err := os.Stat(filepath.Join(projB, "a.txt")); err == nil {
		t.Fatal("A's file appeared in B")
	}
	if !strings.Contains(p.stderr.String(), "parked") {
		t.Errorf("B's log does not say that A's state was parked: %s", p.stderr)
	}
	if code, body, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "project B's focus"}); err != nil || code != 200 {
		t.Fatalf("checkpoint in B: %d %v %v", code, body, err)
	}
	c.CloseIdleConnections()
	if code := p.terminate(t); code != 0 {
		t.Fatalf("B: exit %d: %s", code, p.stderr)
	}

	// Project A again: its own state and snapshots, nothing of B.
	p = startProcWith(t, setup(projA), sock, env, "run")
	c = p.client()
	defer c.CloseIdleConnections()
	res = get(t, c, "/v1/continuity?peek=1")
	if res["focus"] != "project A's focus" || strings.Contains(mustJSON(t, res), "project B") {
		t.Fatalf("A's resume after B: focus %v: %v", res["focus"], res)
	}
	if ids := listedSnapshots(t, p); !slices.Contains(ids, idsA[0]) {
		t.Fatalf("A's snapshot %s is not back: %v", idsA[0], ids)
	}
}

// mustJSON is v as JSON text, to search an answer whole.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfiguredAgentMovedIsRefused: a configured agent whose workdir
// changed is not served from the old place's state: 409 AGENT_MOVED naming
// both directories and the way out; the marker rewritten moves it on purpose.
func TestConfiguredAgentMovedIsRefused(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	if code, body, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "in the first place"}); err != nil || code != 200 {
		t.Fatalf("checkpoint: %d %v %v", code, body, err)
	}
	c.CloseIdleConnections()
	p.terminate(t)

	old, moved := filepath.Join(w.dir, "work"), filepath.Join(w.dir, "elsewhere")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(w.config)
	if err := os.WriteFile(w.config, []byte(strings.Replace(string(cfg), old, moved, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, w.socket, nil, "run", "--config", w.config)
	c = p.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://d/v1/continuity?peek=1")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 409 || body.Error.Code != "AGENT_MOVED" || !strings.Contains(body.Error.Message, old) || !strings.Contains(body.Error.Message, moved) {
		t.Fatalf("resume of a moved agent: %d %+v", resp.StatusCode, body.Error)
	}
	if strings.Contains(body.Error.Message, "in the first place") {
		t.Fatalf("the refusal shows the old state: %s", body.Error.Message)
	}
	if m, err := c.Get("http://d/metrics"); err == nil {
		b, _ := io.ReadAll(m.Body)
		m.Body.Close()
		if strings.Contains(string(b), `continuityd_agent_damaged{agent="builder"}`) {
			t.Errorf("a moved agent is counted as damaged (recover --accept-loss is not its way out)")
		}
	}
	if !strings.Contains(p.stderr.String(), "belongs to another workdir") {
		t.Errorf("the log does not say why the agent is refused: %s", p.stderr)
	}
	// Moving it on purpose: the new workdir written into the marker, as the
	// refusal says; a reload serves it, state and all.
	if err := os.WriteFile(filepath.Join(w.state, "agents", "builder", "workdir"), []byte(moved+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() string { return "the agent moved on purpose is not served after a reload: " + p.stderr.String() }, func() bool {
		resp, err := c.Get("http://d/v1/continuity?peek=1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode == 200 && m["focus"] == "in the first place"
	})
}
