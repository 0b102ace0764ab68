package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestStartMemoryReturnedOnceStartUpIsDone: the start-up's garbage is
// collected and returned to the system once (issue 23's resting memory),
// and only after every agent's start snapshot is over: before it, most
// of that garbage does not exist yet. BenchmarkRestingMemory
// (cmd/continuityd) measures what it saves.
func TestStartMemoryReturnedOnceStartUpIsDone(t *testing.T) {
	cfg := testConfig(t, "builder", "reviewer")
	for i := range cfg.Agents {
		wd := filepath.Join(filepath.Dir(cfg.Daemon.Socket), cfg.Agents[i].Name)
		if err := os.MkdirAll(wd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wd, "a.go"), []byte("package a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Agents[i].Workdir = wd
	}
	cfg.Snapshots = config.Snapshots{Enabled: true, MaxFileSize: config.DefaultSnapshotMaxFileSize,
		Keep: config.DefaultSnapshotKeep, KeepBytes: config.DefaultSnapshotKeepBytes}
	var log lockedBuffer
	startDaemonWith(t, cfg, Options{Version: "test", Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const done = "start-up done"
	testwait.Until(t, func() string { return "the log to say " + done + ":\n" + log.String() }, func() bool {
		return strings.Contains(log.String(), done)
	})
	text := log.String()
	if n := strings.Count(text, done); n != 1 {
		t.Fatalf("%q logged %d times, want once:\n%s", done, n, text)
	}
	at := strings.Index(text, done)
	for _, agent := range []string{"builder", "reviewer"} {
		taken := strings.Index(text, `msg="start snapshot taken" agent=`+agent)
		if taken < 0 || taken > at {
			t.Fatalf("%q before %s's start snapshot was taken:\n%s", done, agent, text)
		}
	}
}
