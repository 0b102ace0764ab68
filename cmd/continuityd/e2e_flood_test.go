//go:build linux

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSocketFloodFromOneUser: the daemon (its own user, socket_mode 0660,
// its open-file limit held at 1024 for the test) is flooded with 3,000
// idle connections by a member of its group whom no agent admits, more
// than every descriptor it has. The flood is held at its per-user bound
// (logged, naming the user): the daemon keeps well under its limit, the
// member named in the agent's users still resumes and checkpoints, root's
// /healthz answers, the daemon's own writes (a checkpoint, the last
// resume) go on, and a change in the workdir is snapshotted.
func TestSocketFloodFromOneUser(t *testing.T) {
	top := usersTop(t, "cdflood", "daemon", "daemon/work")
	home := filepath.Join(top, "daemon")
	work := filepath.Join(home, "work")
	// Idle connections are kept for the whole test (read_timeout), so the
	// flood holds what it took for as long as the checks run.
	state, socket, cfgPath := writeDaemonConfig(t, top, home, true, "read_timeout = \"30m\"\n",
		quickSnapshots+fmt.Sprintf("[[agent]]\nname = \"builder\"\nworkdir = %q\nusers = [\"%d\"]\n", work, memberID))
	flooder := helperBinary(t, top)

	const nofile = 1024
	p := startProcWith(t, func(c *exec.Cmd) {
		// The shell sets the limit and becomes the daemon (same PID).
		c.Path, c.Args = "/bin/sh", append([]string{"sh", "-c", "ulimit -n " + strconv.Itoa(nofile) + ` && exec "$0" "$@"`, binary}, c.Args[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon}
	}, socket, nil, "run", "--config", cfgPath)
	c := p.client()
	defer c.CloseIdleConnections()
	pid := p.cmd.Process.Pid
	if lim := daemonNofile(t, pid); lim != nofile {
		t.Fatalf("the daemon's open-file limit is %d, want %d", lim, nofile)
	}
	var first string
	waitUntil(t, func() string { return "no first snapshot:\n" + p.stderr.String() }, func() bool {
		first = builderSnapshot(t, c)
		return first != ""
	})

	// An outsider to every agent, but a member of the daemon's group: it
	// reaches the socket.
	flood := exec.Command(flooder)
	flood.Env = append(os.Environ(), floodEnv+"="+socket, floodCountEnv+"=3000")
	flood.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: outsiderID, Gid: outsiderID, Groups: []uint32{daemonID}}}
	stdin, err := flood.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := flood.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	flood.Stderr = os.Stderr
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		flood.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	opened, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "opened "))
	if opened <= nofile {
		t.Fatalf("the flood opened %d connections (%q), want more than the daemon's %d descriptors", opened, line, nofile)
	}
	// Root's /healthz and writes; the admitted member's resume and
	// checkpoint: each on a new connection.
	c.CloseIdleConnections()
	if !p.healthy() {
		t.Fatalf("root's /healthz does not answer:\n%s", p.stderr.String())
	}
	if code, body, err := post(c, "/v1/continuity/checkpoint?agent=builder", map[string]any{"focus": "written by root during the flood"}); err != nil || code != 200 {
		t.Fatalf("root's checkpoint during the flood: %d %v %v", code, body, err)
	}
	env := []string{"CONTINUITYD_SOCKET=" + socket}
	if code, stdout, stderr := runAs(t, asMember, env, "", "checkpoint", "--agent", "builder", "--focus", "the member's focus during the flood"); code != 0 {
		t.Fatalf("the admitted member's checkpoint during the flood: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runAs(t, asMember, env, "", "resume", "--agent", "builder"); code != 0 || !strings.Contains(stdout, "the member's focus during the flood") {
		t.Fatalf("the admitted member's resume during the flood: exit %d\n%s%s", code, stdout, stderr)
	}
	// The daemon's own files: the last resume it leaves for the hooks, and
	// a snapshot of a change.
	waitUntil(t, func() string { return "the last resume was not rewritten during the flood" }, func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "agents", "builder", "last-resume.json"))
		return strings.Contains(string(b), "the member's focus during the flood")
	})
	if err := os.WriteFile(filepath.Join(work, "during-flood.txt"), []byte("changed while flooded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() string { return "no snapshot of the change during the flood:\n" + p.stderr.String() }, func() bool {
		s := builderSnapshot(t, c)
		return s != "" && s != first
	})
	waitUntil(t, func() string { return "the flood's refusals are not logged naming its user:\n" + p.stderr.String() }, func() bool {
		return strings.Contains(p.stderr.String(), "socket connections refused") &&
			strings.Contains(p.stderr.String(), fmt.Sprintf("uid %d", outsiderID))
	})
	if fds := openFiles(t, pid); fds > nofile/2 {
		t.Errorf("the daemon holds %d descriptors with the flood on; its bound leaves it at least %d of %d free", fds, nofile/2, nofile)
	}
	if strings.Contains(p.stderr.String(), "too many open files") {
		t.Errorf("the daemon ran out of descriptors:\n%s", p.stderr.String())
	}
	p.terminate(t)
}

// builderSnapshot is the id of builder's newest snapshot, "" for none.
func builderSnapshot(t *testing.T, c *http.Client) string {
	t.Helper()
	snaps, _ := get(t, c, "/v1/snapshots?agent=builder")["snapshots"].([]any)
	if len(snaps) == 0 {
		return ""
	}
	id, _ := snaps[0].(map[string]any)["id"].(string)
	return id
}

// daemonNofile is process pid's soft open-file limit.
func daemonNofile(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, "Max open files") && len(f) >= 5 {
			n, _ := strconv.Atoi(f[3])
			return n
		}
	}
	t.Fatalf("no open-file limit in /proc/%d/limits", pid)
	return 0
}

// openFiles is how many descriptors process pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
