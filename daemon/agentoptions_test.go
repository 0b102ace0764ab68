package daemon

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/policy"
	worksnap "github.com/continuityd/continuityd/daemon/snapshot"
)

// TestAgentOptionsFromConfig: the wiring hands each package what the
// configuration says, key by key, and nothing of an agent's that it does
// not have (a workdir for snapshots).
func TestAgentOptionsFromConfig(t *testing.T) {
	cfg := testConfig(t)
	wd := filepath.Join(filepath.Dir(cfg.Daemon.StateDir), "work")
	cfg.Agents[0].Workdir = wd
	cfg.Watch = config.Watch{Enabled: true, Ignore: []string{"*.log"}, IgnoreDirs: []string{"node_modules"},
		Quiet: config.Duration{Duration: 3 * time.Second}, HandoffFile: "NOTES.md", CapsuleFile: "c.json"}
	cfg.Transcripts = config.Transcripts{Enabled: true, ClaudeHome: "/h/.claude", CodexHome: "/h/.codex", Rescan: config.Duration{Duration: 7 * time.Second}}
	cfg.Policy = config.Policy{Enabled: true, Quiet: config.Duration{Duration: time.Second}, MaxDelay: config.Duration{Duration: 2 * time.Second},
		MinInterval: config.Duration{Duration: 3 * time.Second}, Thresholds: []float64{0.6}, IdleAfter: config.Duration{Duration: 4 * time.Second},
		Refresh: config.Duration{Duration: 5 * time.Second}, PublicStatus: "auto", SealOnCompaction: true}
	cfg.Snapshots = config.Snapshots{Enabled: true, Keep: 9, KeepBytes: 1 << 20, OnExplicitCheckpoint: true, FleetWithhold: []string{"*.pem"}}
	own := []string{cfg.Daemon.StateDir, filepath.Dir(cfg.Daemon.Socket)}

	o := agentOptions(cfg, cfg.Agents[0], nil, nil, nil, nil, nil)
	pc := policy.DefaultConfig()
	pc.Quiet, pc.MaxDelay, pc.MinInterval, pc.IdleAfter, pc.Refresh = time.Second, 2*time.Second, 3*time.Second, 4*time.Second, 5*time.Second
	pc.Thresholds, pc.SealOnSessionEnd = []float64{0.6}, false
	pc.PublicStatus = false // auto, and the agent ships to the local archive alone
	want := capture.Options{Policy: pc,
		Watch: capture.WatchOptions{Enabled: true, Ignore: []string{"*.log"}, IgnoreDirs: []string{"node_modules"}, Quiet: 3 * time.Second,
			HandoffFile: "NOTES.md", CapsuleFile: "c.json", Own: own},
		Transcripts:                  capture.TranscriptOptions{Enabled: true, ClaudeHome: "/h/.claude", CodexHome: "/h/.codex", Rescan: 7 * time.Second},
		SnapshotOnExplicitCheckpoint: true,
	}
	if !reflect.DeepEqual(o.Capture, want) {
		t.Errorf("capture options\n got %+v\nwant %+v", o.Capture, want)
	}
	wantSnap := &worksnap.Options{Ignore: []string{"*.log"}, IgnoreDirs: []string{"node_modules"}, Exclude: own,
		MaxFileBytes: -1, KeepCount: 9, KeepBytes: 1 << 20}
	if !reflect.DeepEqual(o.Snapshots, wantSnap) {
		t.Errorf("snapshot options\n got %+v\nwant %+v", o.Snapshots, wantSnap)
	}
	if o.Dir != cfg.AgentDir("builder") || o.MaxPending != 1000 || o.ResumeTimeout != time.Second || o.Outbox.MinBackoff != 10*time.Millisecond ||
		o.Outbox.UnauthorizedRetry != 500*time.Millisecond || !reflect.DeepEqual(o.FleetWithhold, []string{"*.pem"}) {
		t.Errorf("agent options %+v", o)
	}

	// public_status on and off are taken as said; no workdir, no snapshots.
	cfg.Policy.PublicStatus = "on"
	cfg.Agents[0].Workdir = ""
	if o := agentOptions(cfg, cfg.Agents[0], nil, nil, nil, nil, nil); !o.Capture.Policy.PublicStatus || o.Snapshots != nil {
		t.Errorf("public_status on, no workdir: public status %v, snapshots %+v", o.Capture.Policy.PublicStatus, o.Snapshots)
	}
}
