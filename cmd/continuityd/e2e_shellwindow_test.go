package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clockPassed waits until d has passed on the clock since t: the daemon
// reads the same clock, so what happens after it is that much later for
// the daemon too.
func clockPassed(t *testing.T, since time.Time, d time.Duration) {
	t.Helper()
	waitUntil(t, func() string { return fmt.Sprintf("%s to pass since %s", d, since) }, func() bool { return time.Since(since) > d })
}

// TestAttributionBelievesOnlyTheDaemonsClock: a real daemon, its watcher
// and real hooks.
//   - A shell_start dated 2000-01-01 (and its end) is held to the daemon's
//     receipt: it re-credits nothing a person changed before.
//   - A Bash PreToolUse whose PostToolUse never comes: its window closes at
//     the agent's SessionEnd, so a person's edit after it is outside.
//   - Another never ended and no SessionEnd: its window closes at
//     [watch] shell_max (1s here), logged, and a person's edit after it is
//     outside.
//
// The restore of the agent's own paths (dry run) lists none of the
// person's files.
func TestAttributionBelievesOnlyTheDaemonsClock(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "shell_max = \"1s\"\n")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	var ids []string
	waitUntil(t, func() string { return fmt.Sprintf("no start snapshot (%v); log:\n%s", ids, p.stderr) },
		func() bool { ids = listedSnapshots(t, p); return len(ids) >= 1 })
	start := ids[len(ids)-1]
	outside := func(path string) {
		t.Helper()
		var got []string
		waitUntil(t, func() string { return fmt.Sprintf("by_others to hold %s outside; it holds %q", path, got) },
			func() bool { got = byOthers(t, c, "builder"); return hasAll(got, path+" outside") })
	}
	hook := func(event, id string) {
		t.Helper()
		payload := hookPayload(t, "input-pretooluse-common-fields.json", func(m map[string]any) {
			m["cwd"], m["hook_event_name"], m["tool_use_id"] = work, event, id
			if event == "SessionEnd" {
				m["reason"] = "other"
			}
		})
		if code, out, errs := cli(t, env, payload, "hook"); code != 0 || out != "" {
			t.Fatalf("hook %s: exit %d, out %q, err %s", event, code, out, errs)
		}
	}

	// A backdated shell window.
	writeFile(t, work, "person.md", "by hand\n")
	written := time.Now()
	outside("person.md")
	clockPassed(t, written, 3*time.Second) // past the slack a tool time is believed within
	cursor := get(t, c, "/v1/continuity/wait?max_seconds=1")["cursor"]
	// Dated 2000-01-01, and dated just before the person's edit (a window
	// the bound alone would let cover it).
	for _, at := range []string{"2000-01-01T00:00:00Z", written.Add(-500 * time.Millisecond).UTC().Format(time.RFC3339Nano)} {
		for _, kind := range []string{"shell_start", "shell_end"} {
			body := map[string]any{"kind": "activity", "event": "tool",
				"tool": map[string]any{"name": "Bash", "kind": kind, "id": "backdated" + at, "at": at}}
			if kind == "shell_end" {
				body["tool"].(map[string]any)["at"] = written.Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			}
			if code, ans, err := post(c, "/v1/signals", body); err != nil || code != 200 {
				t.Fatalf("%s dated %s: %d %v %v", kind, at, code, ans, err)
			}
		}
	}
	// The signals reached the agent's capture (and the ledger) before
	// their events reached the wait feed.
	waitUntil(t, func() string { return "the four tool signals on the wait feed" }, func() bool {
		ev, _ := get(t, c, fmt.Sprintf("/v1/continuity/wait?max_seconds=1&after=%v", cursor))["events"].([]any)
		return len(ev) >= 4
	})
	if got := byOthers(t, c, "builder"); !hasAll(got, "person.md outside") {
		t.Errorf("a backdated shell window re-credited the person's earlier edit: by_others %q", got)
	}

	// The backdated window, closed by its end, still covers the ledger's
	// slack (5s) after it: what follows comes later.
	clockPassed(t, time.Now(), 6*time.Second)

	// A shell call that never ends, then the session's end.
	hook("PreToolUse", "toolu_interrupted")
	hook("SessionEnd", "")
	writeFile(t, work, "after-end.md", "the person's, after the session ended\n")
	outside("after-end.md")
	// Closed by the session's end, not by its bound.
	if logs := p.stderr.String(); !strings.Contains(logs, "a shell tool call without its end closed at the agent's end") || strings.Contains(logs, "never ended") {
		t.Errorf("the interrupted call's window was not closed by the session's end:\n%s", logs)
	}

	// Another that never ends, and no session end: the bound.
	hook("PreToolUse", "toolu_forever")
	started := time.Now()
	clockPassed(t, started, 1500*time.Millisecond)
	writeFile(t, work, "after-bound.md", "the person's, long after the call began\n")
	outside("after-bound.md")
	waitUntil(t, func() string { return "the window closed by its bound is not logged:\n" + p.stderr.String() },
		func() bool { return strings.Contains(p.stderr.String(), "a shell tool call never ended") })

	code, out, errOut := cli(t, env, "", "snapshot", "restore", start, "--dry-run")
	if code != 0 {
		t.Fatalf("own-path restore dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"person.md", "after-end.md", "after-bound.md"} {
		if strings.Contains(out, "restore "+f) || !strings.Contains(out, "left alone "+f) {
			t.Errorf("the own-path dry run does not leave the person's %s alone:\n%s", f, out)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "after-bound.md")); err != nil {
		t.Fatal(err)
	}
}
