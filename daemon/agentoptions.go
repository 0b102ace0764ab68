package daemon

import (
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/outbox"
	"github.com/continuityd/continuityd/daemon/policy"
	worksnap "github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// The wiring: each package below takes its own options, and these build
// them from the checked configuration, so only the daemon reads it whole.

// agentOptions are the options agent ac runs with under cfg.
// ledger is the workdir's attribution ledger, shared by every agent on it.
func agentOptions(cfg *config.Config, ac config.Agent, ups map[string]*agent.Upstream, ledger *attribution.Ledger, g *guard.Guard, log *slog.Logger, obs agent.Observer) agent.Options {
	co := captureOptions(cfg, ac)
	co.Attribution = ledger
	return agent.Options{
		Config: ac, Dir: cfg.AgentDir(ac.Name), Modes: statefiles.ModesFor(cfg.Daemon.SocketPerm()),
		Upstreams:  ups,
		MaxPending: cfg.Outbox.MaxPending,
		Outbox: outbox.Options{
			MinBackoff:        cfg.Outbox.MinBackoff.Duration,
			MaxBackoff:        cfg.Outbox.MaxBackoff.Duration,
			MaxRetryAfter:     cfg.Outbox.MaxRetryAfter.Duration,
			UnauthorizedRetry: cfg.Outbox.UnauthorizedRetry.Duration,
		},
		ResumeTimeout: cfg.Outbox.ResumeTimeout.Duration,
		Snapshots:     snapshotOptions(cfg, ac),
		FleetWithhold: cfg.Snapshots.FleetWithhold,
		Capture:       co,
		Guard:         g, Logger: log, Observer: obs,
	}
}

// ownDirs are the daemon's own directories (state, socket): never an
// agent's work, though they may lie in its workdir.
func ownDirs(cfg *config.Config) []string {
	var own []string
	for _, d := range []string{cfg.Daemon.StateDir, filepath.Dir(cfg.Daemon.Socket)} {
		if d != "" && d != "." {
			own = append(own, d)
		}
	}
	return own
}

// snapshotOptions are agent ac's work snapshot store's, nil when
// snapshots are off or the agent has no workdir.
func snapshotOptions(cfg *config.Config, ac config.Agent) *worksnap.Options {
	if !cfg.Snapshots.Enabled || ac.Workdir == "" {
		return nil
	}
	maxFile := cfg.Snapshots.MaxFileSize
	if maxFile == 0 {
		maxFile = -1 // no limit
	}
	return &worksnap.Options{
		Ignore: cfg.Watch.Ignore, IgnoreDirs: cfg.Watch.IgnoreDirs, Exclude: ownDirs(cfg),
		MaxFileBytes: maxFile, KeepCount: cfg.Snapshots.Keep, KeepBytes: cfg.Snapshots.KeepBytes,
		Journal: worksnap.JournalOptions{Enabled: cfg.Snapshots.Journal, KeepAll: cfg.Snapshots.JournalKeepAll.Duration,
			KeepHourly: cfg.Snapshots.JournalKeepHourly.Duration, Share: cfg.Snapshots.JournalShare},
	}
}

// captureOptions are agent ac's capture's (the agent sets what is its own).
func captureOptions(cfg *config.Config, ac config.Agent) capture.Options {
	w, t := cfg.Watch, cfg.Transcripts
	return capture.Options{
		Policy: policyConfig(cfg.Policy, publicStatusOn(cfg.Policy.PublicStatus, ac, cfg)),
		Watch: capture.WatchOptions{Enabled: w.Enabled, Ignore: w.Ignore, IgnoreDirs: w.IgnoreDirs, Quiet: w.Quiet.Duration,
			Settle: w.Settle.Duration, HandoffFile: w.HandoffFile, CapsuleFile: w.CapsuleFile, Own: ownDirs(cfg)},
		Transcripts: capture.TranscriptOptions{Enabled: t.Enabled && ac.Transcript != config.TranscriptOff, Kind: transcriptKind(ac.Transcript),
			ClaudeHome: t.ClaudeHome, CodexHome: t.CodexHome, Rescan: t.Rescan.Duration},
		SnapshotOnExplicitCheckpoint: cfg.Snapshots.OnExplicitCheckpoint,
	}
}

// transcriptKind is the capture's name for whose transcripts the agent's
// transcript key says it follows ("" : either).
func transcriptKind(key string) string {
	switch key {
	case config.TranscriptClaudeCode:
		return capture.KindClaudeCode
	case config.TranscriptCodex:
		return capture.KindCodex
	}
	return ""
}

// policyConfig is the checkpoint policy [policy] p sets, with
// publicStatus deciding whether it manages the public status.
func policyConfig(p config.Policy, publicStatus bool) policy.Config {
	pc := policy.DefaultConfig()
	pc.Enabled = p.Enabled
	pc.Quiet, pc.MaxDelay, pc.MinInterval = p.Quiet.Duration, p.MaxDelay.Duration, p.MinInterval.Duration
	pc.IdleAfter, pc.Refresh = p.IdleAfter.Duration, p.Refresh.Duration
	if len(p.Thresholds) > 0 {
		pc.Thresholds = slices.Clone(p.Thresholds)
	}
	pc.SealOnCompaction, pc.SealOnSessionEnd = p.SealOnCompaction, p.SealOnSessionEnd
	pc.PublicStatus = publicStatus
	return pc
}

// publicStatusOn decides whether the policy manages the PUBLIC status:
// "auto" turns it on only where an upstream shows it (Q-Day's office).
func publicStatusOn(mode string, ac config.Agent, cfg *config.Config) bool {
	switch mode {
	case "on":
		return true
	case "off":
		return false
	}
	for _, name := range ac.Upstreams {
		if uc, ok := cfg.UpstreamFor(name); ok && uc.Kind == config.KindQDay {
			return true
		}
	}
	return false
}
