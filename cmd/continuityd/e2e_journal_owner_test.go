//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootDaemonSaysOwnersJournalIsOff: a root daemon keeps the snapshots
// of a tree another user owns through that user's worker, and keeps no
// version journal there (root never writes into the user's store). Status
// says so for that place, with why, before anyone asks for a history;
// history refuses with the same reason; root's own place has its journal.
func TestRootDaemonSaysOwnersJournalIsOff(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon runs as root over another user's tree")
	}
	top := usersTop(t, "cdjournalowner", "owner", "owner/work", "owner/home")
	work := filepath.Join(top, "owner", "work")
	rootWork := filepath.Join(top, "rootwork")
	if err := os.Mkdir(rootWork, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "README.md", "hello\n")
	if err := os.Chown(filepath.Join(work, "README.md"), daemonID, daemonID); err != nil {
		t.Fatal(err)
	}
	writeFile(t, rootWork, "notes.txt", "root's notes\n")

	_, socket, cfgPath := writeDaemonConfig(t, top, top, true, "", quickSnapshots+fmt.Sprintf(
		"[[agent]]\nname = \"builder\"\nworkdir = %q\n\n[[agent]]\nname = \"keeper\"\nworkdir = %q\n", work, rootWork))
	p := startProc(t, socket, nil, "run", "--config", cfgPath)
	c := p.client()
	defer c.CloseIdleConnections()

	const why = "the version journal is not kept for a workdir whose store runs as its owner"
	journalOf := func(agent string) (state, detail string) {
		agents, _ := get(t, c, "/v1/status")["agents"].([]any)
		for _, a := range agents {
			a := a.(map[string]any)
			if a["name"] != agent {
				continue
			}
			comps, _ := a["components"].([]any)
			for _, comp := range comps {
				comp := comp.(map[string]any)
				if comp["name"] == "journal" {
					s, _ := comp["state"].(string)
					d, _ := comp["detail"].(string)
					return s, d
				}
			}
		}
		return "", ""
	}
	waitUntil(t, func() string {
		b, bd := journalOf("builder")
		k, kd := journalOf("keeper")
		return fmt.Sprintf("status's journal: builder %q (%q), keeper %q (%q); want off with why, and ok; log:\n%s", b, bd, k, kd, p.stderr)
	}, func() bool {
		b, bd := journalOf("builder")
		k, _ := journalOf("keeper")
		return b == "off" && strings.Contains(bd, why) && k == "ok"
	})

	resp, err := c.Get("http://d/v1/history?agent=builder&path=README.md")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode == 200 || !strings.Contains(body, why) {
		t.Fatalf("history of the owner's file: %s %s; want a refusal saying %q", resp.Status, body, why)
	}
}
