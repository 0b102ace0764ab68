package daemon

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/upstream/local"
)

// captureConfig watches a real temp workdir with a short policy.
func captureConfig(t *testing.T) (*config.Config, string) {
	cfg := testConfig(t)
	wd := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "work")
	os.MkdirAll(wd, 0o755)
	cfg.Agents[0].Workdir = wd
	cfg.Watch = config.Watch{Enabled: true, Ignore: []string{}, Quiet: config.Duration{Duration: 100 * time.Millisecond},
		HandoffFile: "HANDOFF.md", CapsuleFile: ".continuity/capsule.json"}
	cfg.Policy = config.Policy{Enabled: true, Quiet: config.Duration{Duration: 200 * time.Millisecond},
		MaxDelay: config.Duration{Duration: time.Second}, MinInterval: config.Duration{Duration: 200 * time.Millisecond},
		Thresholds: []float64{0.5, 0.7, 0.85}, IdleAfter: config.Duration{Duration: time.Hour}, Refresh: config.Duration{Duration: 45 * time.Minute},
		PublicStatus: "on", SealOnCompaction: true, SealOnSessionEnd: true}
	return cfg, wd
}

// TestHandoffFileBecomesCheckpointAutomatically: the agent keeps
// HANDOFF.md; the daemon notices, guards it, and checkpoints it after the
// quiet period, through the outbox like any write.
func TestHandoffFileBecomesCheckpointAutomatically(t *testing.T) {
	cfg, wd := captureConfig(t)
	var log lockedBuffer // the policy's debug log: when its quiet-period decision is made
	td := startDaemonWith(t, cfg, Options{Version: "test", Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	os.WriteFile(filepath.Join(wd, "HANDOFF.md"), []byte("# Goal\nMigrate billing to the new client\n\n## Next\nSwap the callsites\n\n## Do not\nDelete the shim early\n"), 0o644)
	os.WriteFile(filepath.Join(wd, "main.go"), []byte("package main\n"), 0o644)
	waitFor(t, 60*time.Second, func() bool {
		r := td.resume("?peek=1")
		ws, _ := r["working_state"].(map[string]any)
		return r["focus"] == "Migrate billing to the new client" && ws != nil && ws["next_action"] == "Swap the callsites"
	})
	r := td.resume("?peek=1")
	if ws := r["working_state"].(map[string]any); ws["origin"] != "automatic" {
		t.Fatalf("working_state origin: %v", ws)
	}
	slv := r["since_last_visit"].(map[string]any)
	if !strings.Contains(strings.Join(toStrings(slv["paths"]), " "), "main.go") {
		t.Fatalf("activity not in since_last_visit: %v", slv)
	}
	if status, raw := td.doRaw("GET", "/metrics", nil); status != 200 || !strings.Contains(string(raw), `continuityd_watcher_events_total{agent="builder"}`) {
		t.Fatalf("watcher metrics missing: %d", status)
	}
	ps, _ := r["public_status"].(map[string]any)
	if ps == nil || ps["phase"] != "acting" || strings.Contains(ps["next_action"].(string), "billing") {
		t.Fatalf("public status (must be true and never copy private text): %v", ps)
	}
	waitFor(t, 60*time.Second, func() bool {
		ws, _ := local.ReadAll(cfg.AgentDir("builder"))
		for _, w := range ws {
			if w.Origin == "automatic" && w.Checkpoint != nil && w.Checkpoint.Focus != nil {
				return true
			}
		}
		return false
	})
	// The agent's own later write is never overwritten by the same file.
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "the agent's own focus"})
	decided := func() (n int) {
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, `msg="nothing to send"`) && strings.Contains(line, "trigger=quiet") {
				n++
			}
		}
		return n
	}
	before := decided()
	os.WriteFile(filepath.Join(wd, "other.txt"), []byte("x"), 0o644)
	// The policy has made its quiet-period decision on that activity (the
	// moment it would have re-applied the file's focus): then look.
	waitFor(t, 60*time.Second, func() bool { return decided() > before })
	if f := td.resume("?peek=1")["focus"]; f != "the agent's own focus" {
		t.Fatalf("derived content overwrote a newer explicit write: %v", f)
	}
}

func TestHandoffFileWithSecretIsRefusedAndShown(t *testing.T) {
	cfg, wd := captureConfig(t)
	td := startDaemon(t, cfg)
	os.WriteFile(filepath.Join(wd, "HANDOFF.md"), []byte("# Goal\ndeploy with ghp_R7x9Qm2LkP4vT8nZ3wY6bJ1cF5hD0sA2eG7k\n"), 0o644)
	waitFor(t, 60*time.Second, func() bool { return len(td.resume("?peek=1")["refused"].([]any)) == 1 })
	rf := td.resume("?peek=1")["refused"].([]any)[0].(map[string]any)
	e := rf["error"].(map[string]any)
	if rf["source"] != "HANDOFF.md" || e["code"] != "SECRET_DETECTED" || strings.Contains(e["message"].(string), "ghp_") {
		t.Fatalf("refusal: %v", rf)
	}
	if f := td.resume("?peek=1")["focus"]; f != "" {
		t.Fatalf("a refused file changed the state: %v", f)
	}
	// Fixed: the refusal goes away.
	os.WriteFile(filepath.Join(wd, "HANDOFF.md"), []byte("# Goal\ndeploy with the token from the vault\n"), 0o644)
	waitFor(t, 60*time.Second, func() bool { return len(td.resume("?peek=1")["refused"].([]any)) == 0 })
}

func TestCompactionSignalSealsACapsule(t *testing.T) {
	cfg, _ := captureConfig(t)
	td := startDaemon(t, cfg)
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "keep going after the compaction"})
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"})
	waitFor(t, 60*time.Second, func() bool {
		c, _ := td.resume("?peek=1")["capsule"].(map[string]any)
		return c != nil && c["sealed"] == true
	})
	c := td.expectOK("GET", "/v1/capsule", nil)["capsule"].(map[string]any)
	if c["goal"] != "keep going after the compaction" {
		t.Fatalf("sealed capsule: %v", c)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestTranscriptFollowedForUsageAndCompaction: a real Claude Code
// transcript grows in the agent's project folder; the daemon reports the
// used fraction the transcript implies and counts its compaction once.
func TestTranscriptFollowedForUsageAndCompaction(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "transcript-autocompact-opus46-v2.1.39.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(fixture), "\n")
	boundary := 62 // line 63 is the compact_boundary
	if !strings.Contains(lines[boundary], "compact_boundary") {
		t.Fatal("fixture changed: line 63 is not the compact boundary")
	}
	cfg, wd := captureConfig(t)
	cfg.Watch.Enabled = false
	home := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "claude")
	cfg.Transcripts = config.Transcripts{Enabled: true, ClaudeHome: home}
	proj := transcript.ClaudeProjectDir(home, wd)
	os.MkdirAll(proj, 0o700)
	path := filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines[:boundary], "")), 0o600)

	// What the transcript says before the boundary, computed independently.
	tr := transcript.NewTracker(transcript.ClaudeCode)
	var want float64
	for _, l := range lines[:boundary] {
		if u, _ := tr.Line([]byte(l)); u.Usage != nil {
			want = u.Usage.Fraction
		}
	}
	td := startDaemon(t, cfg)
	waitFor(t, 60*time.Second, func() bool {
		f, _ := td.resume("?peek=1")["context"].(map[string]any)["used_fraction"].(float64)
		return f > 0 && abs(f-want) <= 0.01
	})
	if n := td.resume("?peek=1")["context"].(map[string]any)["compactions"].(float64); n != 0 {
		t.Fatalf("history counted as compactions: %v", n)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(strings.Join(lines[boundary:], ""))
	f.Close()
	// The whole transcript read: its last usage is reported (computed
	// independently, as above); by then the compaction counts once.
	var wantEnd float64
	for _, l := range lines[boundary:] {
		if u, _ := tr.Line([]byte(l)); u.Usage != nil {
			wantEnd = u.Usage.Fraction
		}
	}
	if wantEnd == 0 {
		t.Fatal("fixture changed: no usage after the compact boundary")
	}
	waitFor(t, 60*time.Second, func() bool {
		c := td.resume("?peek=1")["context"].(map[string]any)
		f, _ := c["used_fraction"].(float64)
		return c["compactions"].(float64) >= 1 && abs(f-wantEnd) <= 0.01
	})
	if n := td.resume("?peek=1")["context"].(map[string]any)["compactions"].(float64); n != 1 {
		t.Fatalf("compactions %v, want exactly 1", n)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestGitCommitBecomesReceipt: a commit in the watched workdir becomes a
// receipt with its subject secret-redacted, event-driven.
func TestGitCommitBecomesReceipt(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cfg, wd := captureConfig(t)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(wd, "a.txt"), []byte("a"), 0o644)
	git("add", "a.txt")
	git("commit", "-q", "-m", "first")
	td := startDaemon(t, cfg)
	os.WriteFile(filepath.Join(wd, "b.txt"), []byte("b"), 0o644)
	git("add", "b.txt")
	git("commit", "-q", "-m", "rotate the key ghp_R7x9Qm2LkP4vT8nZ3wY6bJ1cF5hD0sA2eG7k")
	waitFor(t, 60*time.Second, func() bool { return len(td.resume("?peek=1")["receipts"].([]any)) == 1 })
	rc := td.resume("?peek=1")["receipts"].([]any)[0].(string)
	if !strings.HasPrefix(rc, "work@") || strings.Contains(rc, "ghp_") || !strings.Contains(rc, "rotate the key") {
		t.Fatalf("receipt %q", rc)
	}
	if c := td.resume("?peek=1")["since_last_visit"].(map[string]any)["commits"].([]any); len(c) != 1 {
		t.Fatalf("since_last_visit commits: %v", c)
	}
}

// TestTranscriptPlanAndNewSession: the daemon follows the workdir's Claude
// Code transcript; a session started after the daemon (a new transcript in
// the project folder, no hook) becomes the followed one, and the plan its
// TodoWrite calls state reaches resume, with the step in progress as the
// next action the agent had not written itself.
func TestTranscriptPlanAndNewSession(t *testing.T) {
	sample := func(name string) ([]byte, []capsule.PlanStep) {
		raw, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "plans", name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		golden, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "plans", name+".golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		var plan []capsule.PlanStep
		if err := json.Unmarshal(golden, &plan); err != nil {
			t.Fatal(err)
		}
		return raw, plan
	}
	oldRaw, oldPlan := sample("claude-todowrite-v2.0.76-entireio-cli")
	newRaw, newPlan := sample("claude-todowrite-v2.0.14-jnarowski-agentcmd") // ends with a step in progress
	cfg, wd := captureConfig(t)
	cfg.Watch.Enabled = false
	home := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "claude")
	cfg.Transcripts = config.Transcripts{Enabled: true, ClaudeHome: home}
	proj := transcript.ClaudeProjectDir(home, wd)
	os.MkdirAll(proj, 0o700)
	os.WriteFile(filepath.Join(proj, "00000000-0000-4000-8000-000000000001.jsonl"), oldRaw, 0o600)
	td := startDaemon(t, cfg)
	waitPlan := func(want []capsule.PlanStep) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			raw, _ := json.Marshal(td.resume("?peek=1")["plan"])
			var got []capsule.PlanStep
			json.Unmarshal(raw, &got)
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("plan in resume %s, want %v", raw, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The transcript there at the start is followed: its plan is the plan
	// now, though read from history.
	waitPlan(oldPlan)
	if ws, _ := td.resume("?peek=1")["working_state"].(map[string]any); ws != nil {
		t.Fatalf("a plan read from history set the working state: %v", ws)
	}

	// A new session starts after the daemon: no hook names it.
	if err := os.WriteFile(filepath.Join(proj, "00000000-0000-4000-8000-000000000002.jsonl"), newRaw, 0o600); err != nil {
		t.Fatal(err)
	}
	waitPlan(newPlan)
	cur, ok := capsule.CurrentPlanStep(newPlan)
	if !ok {
		t.Fatal("the sample's plan has no step in progress")
	}
	// Written while followed, its step in progress is the next action.
	waitFor(t, 60*time.Second, func() bool {
		ws, _ := td.resume("?peek=1")["working_state"].(map[string]any)
		return ws != nil && ws["next_action"] == cur.Step
	})
}

// transcriptHealth is the detail of the agent's transcripts component in
// status ("" before there is one).
func transcriptHealth(td *testDaemon) string {
	_, st := td.do("GET", "/v1/status", nil)
	agents, _ := st["agents"].([]any)
	for _, a := range agents {
		comps, _ := a.(map[string]any)["components"].([]any)
		for _, c := range comps {
			if m, _ := c.(map[string]any); m["name"] == "transcripts" {
				d, _ := m["detail"].(string)
				return m["state"].(string) + ": " + d
			}
		}
	}
	return ""
}

// TestTranscriptNewProjectFolderFollowedByWatch: a Claude Code session
// started after the daemon, in a project Claude Code had never seen (its
// project folder does not exist yet), is followed because the folders are
// watched: the rescan is set to 10 minutes, so only the watch can find it.
// The fixture is a real transcript (testdata/plans/NOTE.md says where from).
func TestTranscriptNewProjectFolderFollowedByWatch(t *testing.T) {
	name := "claude-todowrite-v2.0.14-jnarowski-agentcmd"
	raw, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "plans", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "plans", name+".golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []capsule.PlanStep
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	cfg, wd := captureConfig(t)
	cfg.Watch.Enabled = false
	home := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "claude")
	os.MkdirAll(home, 0o700) // Claude Code is installed, but has no projects folder yet
	cfg.Transcripts = config.Transcripts{Enabled: true, ClaudeHome: home, Rescan: config.Duration{Duration: 10 * time.Minute}}
	td := startDaemon(t, cfg)
	proj := transcript.ClaudeProjectDir(home, wd)
	// The follower has looked once and is waiting: what appears now can
	// only be found by a watch.
	waitFor(t, 30*time.Second, func() bool {
		return transcriptHealth(td) == "ok: no session yet; watching "+proj
	})

	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join(proj, "00000000-0000-4000-8000-000000000003.jsonl")
	if err := os.WriteFile(session, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second) // generous: the rescan is 10 minutes away
	for {
		got, _ := json.Marshal(td.resume("?peek=1")["plan"])
		var plan []capsule.PlanStep
		json.Unmarshal(got, &plan)
		if slices.Equal(plan, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new session was not followed: plan in resume %s, transcripts %q", got, transcriptHealth(td))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h := transcriptHealth(td); h != "ok: following "+session {
		t.Fatalf("transcripts component %q, want following %s", h, session)
	}
}

// TestCodexRolloutFollowedByWatch: a Codex rollout whose first line was
// not whole when the follower looked (Codex writes session_meta in pieces)
// is followed once the line is complete: the write, not the 10-minute
// rescan, makes the follower look again (it sees no new file appear). The
// fixture is a real rollout (testdata/NOTE.md), its cwd set to the workdir.
func TestCodexRolloutFollowedByWatch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("sources", "transcript", "testdata", "rollout-2026-05-11-v0.125.0-token-count.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, wd := captureConfig(t)
	cfg.Watch.Enabled = false
	codex := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "codex")
	cfg.Transcripts = config.Transcripts{Enabled: true, CodexHome: codex, Rescan: config.Duration{Duration: 10 * time.Minute}}
	first, rest, _ := strings.Cut(string(raw), "\n")
	var meta map[string]any
	if err := json.Unmarshal([]byte(first), &meta); err != nil {
		t.Fatal(err)
	}
	meta["payload"].(map[string]any)["cwd"] = wd
	line, _ := json.Marshal(meta)

	now := time.Now()
	day := filepath.Join(codex, "sessions", now.Format("2006"), now.Format("01"), now.Format("02"))
	if err := os.MkdirAll(day, 0o700); err != nil {
		t.Fatal(err)
	}
	rollout := filepath.Join(day, "rollout-2026-05-11T08-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
	half := len(line) / 2
	if err := os.WriteFile(rollout, line[:half], 0o600); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, cfg)
	// The first scan is done: it saw the rollout, whose first line is not
	// whole, so it does not know whose session it is yet.
	waitFor(t, 30*time.Second, func() bool { return strings.HasPrefix(transcriptHealth(td), "ok: no session yet") })

	f, err := os.OpenFile(rollout, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line[half:])
	f.WriteString("\n" + rest)
	f.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if h := transcriptHealth(td); h == "ok: following "+rollout {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the completed rollout was not followed: transcripts %q", transcriptHealth(td))
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, 30*time.Second, func() bool {
		f, _ := td.resume("?peek=1")["context"].(map[string]any)["used_fraction"].(float64)
		return f > 0
	})
}
