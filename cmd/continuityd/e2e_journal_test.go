package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// journalWorkspace is a workspace whose snapshot policy allows one
// snapshot per minInterval: the edits the tests make come inside it.
func journalWorkspace(t *testing.T, minInterval string) (*workspace, string) {
	w := newWorkspace(t)
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[watch]\nquiet = \"100ms\"\n[policy]\nquiet = \"500ms\"\nmin_interval = %q\n", minInterval)
	f.Close()
	return w, filepath.Join(w.dir, "work")
}

// history is the CLI's `history PATH --json`.
func history(t *testing.T, env []string, work, rel string) ops.HistoryAnswer {
	t.Helper()
	code, out, errOut := cli(t, env, "", "history", filepath.Join(work, rel), "--json")
	if code != 0 {
		t.Fatalf("history %s: exit %d %s %s", rel, code, out, errOut)
	}
	var h ops.HistoryAnswer
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("history %s: %v in %s", rel, err, out)
	}
	return h
}

// waitVersion waits until history lists a version of rel holding
// content (its size and blob), by by; it returns it.
func waitVersion(t *testing.T, env []string, work, rel, content, by string) ops.HistoryVersion {
	t.Helper()
	want := gitBlobID(content)
	var h ops.HistoryAnswer
	var found ops.HistoryVersion
	waitUntil(t, func() string {
		return fmt.Sprintf("history of %s to list %q by %s; it lists %+v", rel, content, by, h.Versions)
	},
		func() bool {
			h = history(t, env, work, rel)
			for _, v := range h.Versions {
				if v.Blob == want && (by == "" || v.By == by) {
					found = v
					return true
				}
			}
			return false
		})
	return found
}

// agentEdit writes rel as Claude Code's Write tool does and sends its
// real PostToolUse payload through `continuityd hook`.
func agentEdit(t *testing.T, env []string, work, rel, content string) {
	t.Helper()
	writeFile(t, work, rel, content)
	payload := hookPayload(t, "input-posttooluse-write.json", func(m map[string]any) {
		m["cwd"] = work
		m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, rel)
		m["tool_input"].(map[string]any)["content"] = content
	})
	if code, out, errs := cli(t, env, payload, "hook"); code != 0 || out != "" {
		t.Fatalf("hook: exit %d, out %q, err %s", code, out, errs)
	}
}

// waitLoss waits for resume's work_lost to name rel.
func waitLoss(t *testing.T, p *proc, rel string) capsule.WorkLost {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	var got []capsule.WorkLost
	waitUntil(t, func() string { return fmt.Sprintf("work_lost naming %s; resume has %+v; log:\n%s", rel, got, p.stderr) },
		func() bool {
			got = resumeWorkLost(t, c)
			for _, l := range got {
				for _, q := range l.Paths {
					if q == rel {
						return true
					}
				}
			}
			return false
		})
	for _, l := range got {
		for _, q := range l.Paths {
			if q == rel {
				return l
			}
		}
	}
	panic("unreachable")
}

// bringBackNewest runs the restore command resume gives for l and checks
// rel holds want after, and that the loss said which version and what was
// not covered.
func bringBackNewest(t *testing.T, env []string, work, rel, want string, l capsule.WorkLost, notCovered string) {
	t.Helper()
	if len(l.Versions) == 0 || !strings.Contains(l.NotCovered, notCovered) {
		t.Fatalf("the loss names no journal version, or says %q of what was not covered (want %q): %+v", l.NotCovered, notCovered, l)
	}
	args := strings.Fields(l.Restore)
	if len(args) < 4 || args[0] != "continuityd" {
		t.Fatalf("restore command %q", l.Restore)
	}
	code, out, errOut := cli(t, env, "", args[1:]...)
	if code != 0 {
		t.Fatalf("%s: exit %d %s %s", l.Restore, code, out, errOut)
	}
	if got := readFile(t, work, rel); got != want {
		t.Fatalf("after %s, %s is %q, want the newest edit %q (%s)", l.Restore, rel, got, want, out)
	}
	if !strings.Contains(out, "undo with: continuityd snapshot restore") {
		t.Fatalf("%s printed no undo command:\n%s", l.Restore, out)
	}
}

// journalRepo makes the Go project of the scenarios: main.go committed,
// then an older uncommitted change the start snapshot holds.
func journalRepo(t *testing.T, work string) {
	writeFile(t, work, "main.go", "package main\n\nfunc main() {}\n")
	writeFile(t, work, "billing/billing.go", "package billing\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")
	writeFile(t, work, "main.go", "package main\n\n// older work\nfunc main() {}\n")
}

const newestMain = "package main\n\n// older work\nfunc main() { println(Tax(2)) }\n\nfunc Tax(n int) int { return n * 21 / 100 }\n"

// TestJournalCheckoutInsideMinInterval: the agent's edit (PostToolUse
// Write) and a `git checkout -- .` come inside min_interval, so no
// snapshot holds the edit; the version journal does, and the restore
// resume gives for the loss brings back that newest edit, not the
// snapshot's older content.
func TestJournalCheckoutInsideMinInterval(t *testing.T) {
	t.Parallel()
	w, work := journalWorkspace(t, "20s")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	journalRepo(t, work)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	// A policy snapshot, then min_interval holds the next one back.
	writeFile(t, work, "billing/billing.go", "package billing\n\n// older work\n")
	before := waitSnapshots(t, p, 2, time.Minute, "a policy snapshot")

	agentEdit(t, env, work, "main.go", newestMain)
	waitVersion(t, env, work, "main.go", newestMain, "agent")
	userGit(t, work, "checkout", "--", ".")
	l := waitLoss(t, p, "main.go")
	if l.Snapshot != before[0] {
		t.Fatalf("the loss names snapshot %s, want %s, the newest before the edit (a snapshot was taken inside min_interval)", l.Snapshot, before[0])
	}
	if v := waitVersion(t, env, work, "main.go", newestMain, "agent"); v.Snapshot != "" {
		t.Fatalf("the newest edit is in snapshot %s: the scenario needs it in none", v.Snapshot)
	}
	bringBackNewest(t, env, work, "main.go", newestMain, l, "settle window")
}

// TestJournalCheckoutAfterStop: an edit, its PostToolUse and the agent's
// Stop, then `git checkout -- main.go` a moment later. The Stop takes the
// turn's snapshot (turn_end, whatever min_interval says), which holds the
// edit: the loss names that snapshot, offers no journal version (the
// snapshot has the newest content), and the command resume gives brings
// the edit back from it.
func TestJournalCheckoutAfterStop(t *testing.T) {
	t.Parallel()
	w, work := journalWorkspace(t, "20s")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	journalRepo(t, work)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()

	agentEdit(t, env, work, "main.go", newestMain)
	stop := hookPayload(t, "input-stop.json", func(m map[string]any) { m["cwd"] = work })
	if code, out, errs := cli(t, env, stop, "hook"); code != 0 {
		t.Fatalf("Stop hook: exit %d, out %q, err %s", code, out, errs)
	}
	var turnEnd string
	var listed []any
	waitUntil(t, func() string {
		return fmt.Sprintf("a turn_end snapshot after the Stop; listed %v; log:\n%s", listed, p.stderr)
	},
		func() bool {
			listed, _ = get(t, c, "/v1/snapshots")["snapshots"].([]any)
			for _, s := range listed {
				if s := s.(map[string]any); s["trigger"] == "turn_end" {
					turnEnd, _ = s["id"].(string)
					return true
				}
			}
			return false
		})
	if v := waitVersion(t, env, work, "main.go", newestMain, "agent"); v.Snapshot != turnEnd {
		t.Fatalf("history says the newest edit is in snapshot %q, want the turn's %s", v.Snapshot, turnEnd)
	}
	userGit(t, work, "checkout", "--", "main.go")
	l := waitLoss(t, p, "main.go")
	if l.Snapshot != turnEnd || len(l.Versions) != 0 {
		t.Fatalf("the loss names snapshot %s and versions %+v; want the turn's snapshot %s, which holds the newest edit, and no journal version", l.Snapshot, l.Versions, turnEnd)
	}
	args := strings.Fields(l.Restore)
	if len(args) < 4 || args[0] != "continuityd" || !strings.Contains(l.Restore, "--lost "+l.ID) {
		t.Fatalf("restore command %q, want the loss's", l.Restore)
	}
	code, out, errOut := cli(t, env, "", args[1:]...)
	if code != 0 {
		t.Fatalf("%s: exit %d %s %s", l.Restore, code, out, errOut)
	}
	if got := readFile(t, work, "main.go"); got != newestMain {
		t.Fatalf("after %s, main.go is %q, want the newest edit (%s)", l.Restore, got, out)
	}
}

// TestJournalEditBeforeKill: an edit settles and is journaled, the
// daemon is killed (SIGKILL) before any snapshot holds it, and the file is
// checked out while the daemon is down: at the next start, resume names
// the loss, says the daemon was not watching, and its command brings the
// edit back from the journal.
func TestJournalEditBeforeKill(t *testing.T) {
	t.Parallel()
	w, work := journalWorkspace(t, "10m")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	journalRepo(t, work)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	agentEdit(t, env, work, "main.go", newestMain)
	waitVersion(t, env, work, "main.go", newestMain, "agent")
	p.kill()

	userGit(t, work, "checkout", "--", "main.go")
	p = startProc(t, w.socket, nil, "run", "--config", w.config)
	l := waitLoss(t, p, "main.go")
	bringBackNewest(t, env, work, "main.go", newestMain, l, "not watching")
}

// gitBlobID is git's id of a blob holding content.
func gitBlobID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(content), content)
	return hex.EncodeToString(h.Sum(nil))
}
