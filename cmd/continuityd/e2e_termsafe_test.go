package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// rawControls returns the control bytes in s other than newline and tab:
// what would act on a terminal or sit unseen in an agent's context.
func rawControls(s string) []string {
	var found []string
	for i := 0; i < len(s); i++ {
		if b := s[i]; (b < 0x20 && b != '\n' && b != '\t') || b == 0x7f {
			found = append(found, s[max(0, i-10):min(len(s), i+10)])
		}
	}
	return found
}

// TestHumanTextEscapesFileNames: a file named with ESC, OSC and BEL
// sequences (recolour, retitle the terminal, clear the screen) goes through
// a real daemon's snapshot; `snapshot show`, `snapshot restore --dry-run`,
// the markdown `resume` and the hook's SessionStart context show its name
// escaped as git quotes it, and no raw control character.
func TestHumanTextEscapesFileNames(t *testing.T) {
	w, work := snapshotWorkspace(t, "")
	name := "esc\033[31mred\033]0;pwned\007\033[2J.txt"
	quoted := `"esc\033[31mred\033]0;pwned\a\033[2J.txt"`
	writeFile(t, work, "plain.txt", "one\n")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	agentDir := filepath.Join(w.state, "agents", "builder")
	// The watcher starts beside the socket: until it reports the file, the
	// file is written again (each write is a change it must report).
	c := p.client()
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		writeFile(t, work, name, fmt.Sprintf("hidden %d\n", i))
		slv, _ := get(t, c, "/v1/continuity?peek=1")["since_last_visit"].(map[string]any)
		if paths, _ := slv["paths"].([]any); slices.Contains(paths, any(name)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never reported the file within 60 s; since_last_visit %v", slv)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log: %s", p.stderr)
		}
	})
	id := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && workFile(wk, name) != nil
	}).Work.Snapshot.ID
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	check := func(what, out string) {
		t.Helper()
		if raw := rawControls(out); len(raw) > 0 {
			t.Errorf("%s carries raw control characters %q:\n%s", what, raw, out)
		}
		if !strings.Contains(out, quoted) {
			t.Errorf("%s does not show the name escaped as %s:\n%s", what, quoted, out)
		}
	}

	code, out, errOut := cli(t, env, "", "snapshot", "show", id)
	if code != 0 {
		t.Fatalf("snapshot show (exit %d): %s", code, errOut)
	}
	check("snapshot show", out)

	if err := os.Remove(filepath.Join(work, name)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, env, "", "snapshot", "restore", id, "--all", "--dry-run")
	if code != 0 {
		t.Fatalf("snapshot restore --dry-run (exit %d): %s", code, errOut)
	}
	check("snapshot restore --dry-run", out)

	code, out, errOut = cli(t, env, "", "resume", "--peek")
	if code != 0 {
		t.Fatalf("resume (exit %d): %s", code, errOut)
	}
	check("resume", out)

	payload, _ := json.Marshal(map[string]string{"session_id": "s1", "cwd": work, "hook_event_name": "SessionStart", "source": "startup"})
	code, out, errOut = cli(t, env, string(payload), "hook")
	var o struct {
		H struct {
			Ctx string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &o); code != 0 || err != nil {
		t.Fatalf("hook SessionStart (exit %d, %v): %q %s", code, err, out, errOut)
	}
	check("the SessionStart context", o.H.Ctx)
	p.terminate(t)
}
