package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/upstream/local"
)

// The automatic side end to end, through the whole daemon: what the
// capture derives (daemon/capture tests it on its own) is checkpointed by
// the policy, delivered through the outbox to an upstream, counted in the
// metrics and shown over the API.

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

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
