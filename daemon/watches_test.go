package daemon

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
)

// metricValue is the value of an unlabelled gauge in the metrics text.
func (td *testDaemon) metricValue(name string) string {
	td.t.Helper()
	_, raw := td.doRaw("GET", "/metrics", nil)
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestTwoAgentsOnOneWorkdirShareOneWatch: two agents on one workdir cost
// one set of inotify watches (one instance, one watch per directory), as
// the kernel counts them, and both are told of every burst; a reload that
// reopens both on the same workdir keeps that watcher, not walking the
// tree again.
func TestTwoAgentsOnOneWorkdirShareOneWatch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts inotify watches in /proc")
	}
	cfg, wd := captureConfig(t)
	cfg.Agents = append(cfg.Agents, config.Agent{Name: "reviewer", Workdir: wd, Upstreams: []string{"local"}})
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(wd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	next := *cfg
	next.Policy.Quiet = config.Duration{Duration: 300 * time.Millisecond} // reopens both agents
	td := startDaemonWith(t, cfg, Options{Version: "test", Load: func() (*config.Config, error) { c := next; return &c, nil }})

	const dirs = 4 // the workdir, a, a/b, c
	oneWatch := func(when string) {
		t.Helper()
		if w, n := inotifyWatchesOn(t, wd); w != dirs || n != 1 {
			t.Fatalf("%s: the workdir costs %d inotify watches in %d instances, want %d in 1", when, w, n, dirs)
		}
		if v := td.metricValue("continuityd_workdir_watchers"); v != "1" {
			t.Fatalf("%s: continuityd_workdir_watchers = %q, want 1", when, v)
		}
		if v := td.metricValue("continuityd_workdir_watched_dirs"); v != "4" {
			t.Fatalf("%s: continuityd_workdir_watched_dirs = %q, want 4", when, v)
		}
	}
	bothTold := func(path string) {
		t.Helper()
		for _, agent := range []string{"builder", "reviewer"} {
			waitFor(t, 60*time.Second, func() bool {
				slv, _ := td.resume("?peek=1&agent=" + agent)["since_last_visit"].(map[string]any)
				ps, _ := slv["paths"].([]any)
				return slices.Contains(ps, any(path))
			})
		}
	}
	oneWatch("started")
	if err := os.WriteFile(filepath.Join(wd, "a/b/x.go"), []byte("package b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bothTold("a/b/x.go")

	w := td.d.watches.For(wd).Watcher()
	before := td.d.snap().agents
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, a := range td.d.snap().agents {
		if before[name] == a {
			t.Fatalf("agent %s was not reopened by the reload: the test does not test the hold", name)
		}
	}
	if got := td.d.watches.For(wd).Watcher(); got != w {
		t.Fatal("the reload that reopened both agents on the same workdir started another watcher")
	}
	oneWatch("after the reload")
	if err := os.WriteFile(filepath.Join(wd, "c/y.go"), []byte("package c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bothTold("c/y.go")
}
