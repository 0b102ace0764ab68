package main

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatusSaysAnUnwatchedDirectory: a workdir holding a directory too
// deep for the kernel to watch (its path passes PATH_MAX) gets a WARN
// line, and status, as text and JSON, shows the watch degraded with the
// reason, not "watch ok".
func TestStatusSaysAnUnwatchedDirectory(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	work := w.dir + "/work"
	writeFile(t, work, "a.go", "package a\n")
	fd, err := unix.Open(work, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg := strings.Repeat("d", 200)
	for range 25 { // made through handles: no path can name the deepest
		if err := unix.Mkdirat(fd, seg, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, seg, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	var out string
	waitUntil(t, func() string {
		return "status never showed the watch degraded:\n" + out + "\nlog:\n" + p.stderr.String()
	}, func() bool {
		code, o, _ := cli(t, nil, "", "status", "--socket", w.socket)
		out = o
		return code == exitOK && strings.Contains(out, "  watch        degraded: a directory cannot be watched; changes below are not seen (") &&
			strings.Contains(out, "file name too long)")
	})
	if !strings.Contains(p.stderr.String(), "cannot watch directory") {
		t.Errorf("no WARN line:\n%s", p.stderr)
	}
	c := p.client()
	defer c.CloseIdleConnections()
	agents := get(t, c, "/v1/status")["agents"].([]any)
	var watch map[string]any
	for _, cp := range agents[0].(map[string]any)["components"].([]any) {
		if m := cp.(map[string]any); m["name"] == "watch" {
			watch = m
		}
	}
	if watch["state"] != "degraded" || !strings.Contains(watch["detail"].(string), "file name too long") {
		t.Errorf("status --json's watch: %v", watch)
	}
}
