package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
)

// TestReloadsDuringStartUpAreServedOnceRunning: reloads asked for while Run
// starts (before it, even) wait for Run's agents and are then served, by
// Run: no reload builds agents beside Run's (their residencies are locked:
// the reload would fail and leave the daemon serving none) or starts one
// with no context (a panic). Which goroutine gets there first does not
// matter: the outcome is the same.
func TestReloadsDuringStartUpAreServedOnceRunning(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "continuityd.toml")
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "d.sock")
	writeConfig(t, path, state, sock, "alpha")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// The file now has one agent more than the daemon starts with: a
	// served reload adds it.
	writeConfig(t, path, state, sock, "alpha", "beta")
	ready := make(chan struct{})
	d, err := New(cfg, Options{Load: func() (*config.Config, error) { return config.Load(path) }, Ready: func() { close(ready) }})
	if err != nil {
		t.Fatal(err)
	}
	const reloaders = 8
	reloaded := make(chan error, reloaders)
	for range reloaders {
		go func() { reloaded <- d.Reload() }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	td := &testDaemon{t: t, cfg: cfg, d: d, cancel: cancel, done: ran, http: benchClient(sock)}
	t.Cleanup(td.stop)
	select {
	case <-ready:
	case err := <-ran:
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not become ready in 30 s")
	}
	for i := range reloaders {
		select {
		case err := <-reloaded:
			if err != nil {
				t.Fatalf("reload %d asked for during start-up: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("reload %d asked for during start-up was not served in 30 s", i)
		}
	}
	if got := agentNames(td); strings.Join(got, ",") != "alpha,beta" {
		t.Fatalf("agents after reloads during start-up: %v", got)
	}
	td.expectOK("POST", "/v1/continuity/checkpoint?agent=beta", map[string]any{"focus": "beta serves"})
	td.stop()
	if err := d.Reload(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("reload after Run returned: %v, want ErrNotRunning", err)
	}
}

// TestReloadWhenRunFailedToStart: a Reload waiting for a Run that fails
// (here: its state directory is a file) returns ErrNotRunning instead of
// waiting for ever.
func TestReloadWhenRunFailedToStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.Daemon.StateDir = filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(cfg.Daemon.StateDir, []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- d.Reload() }()
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("Run with a state directory that is a file started")
	}
	select {
	case err := <-reloaded:
		if !errors.Is(err, ErrNotRunning) {
			t.Fatalf("reload waiting for a Run that failed: %v, want ErrNotRunning", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reload waiting for a Run that failed still waits after 30 s")
	}
}
