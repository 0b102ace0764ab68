//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAgentAccessOnSharedSocket: with socket_mode 0660 a member of the
// daemon's group reaches the socket, but only the agents that admit it.
// "theirs" (its workdir the daemon user's, no users named) answers the
// member's resume, snapshot diff and restore with 403 AGENT_FORBIDDEN
// naming it and changes nothing; "ours" names the member in users and
// serves it; the member's status lists "ours" only; root sees both.
func TestAgentAccessOnSharedSocket(t *testing.T) {
	top := usersTop(t, "cdaccess", "daemon", "daemon/theirs", "daemon/ours")
	home := filepath.Join(top, "daemon")
	workTheirs, workOurs := filepath.Join(home, "theirs"), filepath.Join(home, "ours")
	secret := filepath.Join(workTheirs, "db.conf")
	if err := os.WriteFile(secret, []byte("db password is hunter2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workOurs, "notes.md"), []byte("shared notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{secret, filepath.Join(workOurs, "notes.md")} {
		if err := os.Chown(f, daemonID, daemonID); err != nil {
			t.Fatal(err)
		}
	}
	_, socket, cfgPath := writeDaemonConfig(t, top, home, true, "", fmt.Sprintf(
		"[[agent]]\nname = \"theirs\"\nworkdir = %q\n\n[[agent]]\nname = \"ours\"\nworkdir = %q\nusers = [\"%d\"]\n",
		workTheirs, workOurs, memberID))
	p := startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", cfgPath)
	c := p.client()
	defer c.CloseIdleConnections()
	// Each agent's first snapshot, seen by root (whom every agent admits).
	latest := map[string]string{}
	for _, name := range []string{"theirs", "ours"} {
		waitUntil(t, func() string { return "agent " + name + " has no snapshot within 60 s:\n" + p.stderr.String() }, func() bool {
			snaps, _ := get(t, c, "/v1/snapshots?agent="+name)["snapshots"].([]any)
			if len(snaps) > 0 {
				latest[name] = snaps[0].(map[string]any)["id"].(string)
			}
			return latest[name] != ""
		})
	}
	if err := os.WriteFile(secret, []byte("db password is newer, the owner's edit\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	env := []string{"CONTINUITYD_SOCKET=" + socket}

	for _, args := range [][]string{
		{"resume", "--agent", "theirs"},
		{"snapshot", "diff", "--agent", "theirs", latest["theirs"]},
		{"snapshot", "restore", "--agent", "theirs", latest["theirs"], "--all"},
	} {
		code, out, errOut := runAs(t, asMember, env, "", args...)
		if code != 1 || !strings.Contains(errOut, "AGENT_FORBIDDEN") || !strings.Contains(errOut, `"theirs"`) || strings.Contains(out, "hunter2") {
			t.Errorf("member's %s: exit %d, want 1 and AGENT_FORBIDDEN naming \"theirs\"\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if b, _ := os.ReadFile(secret); !strings.Contains(string(b), "the owner's edit") {
		t.Errorf("the refused restore changed the owner's file: %q", b)
	}
	for _, args := range [][]string{
		{"resume", "--agent", "ours"},
		{"snapshot", "diff", "--agent", "ours", latest["ours"]},
		{"snapshot", "restore", "--agent", "ours", latest["ours"], "--all", "--dry-run"},
	} {
		if code, out, errOut := runAs(t, asMember, env, "", args...); code != 0 {
			t.Errorf("member's %s (named in users): exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}
	code, out, errOut := runAs(t, asMember, env, "", "status")
	if code != 0 || !strings.Contains(out, "ours") || strings.Contains(out, "theirs") {
		t.Errorf("member's status (exit %d) must list ours only:\n%s%s", code, out, errOut)
	}
	if st := get(t, c, "/v1/status"); len(st["agents"].([]any)) != 2 {
		t.Errorf("root's status lists %d agents, want 2", len(st["agents"].([]any)))
	}
	p.terminate(t)
}
