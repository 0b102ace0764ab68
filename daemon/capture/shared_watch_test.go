package capture

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/watch"
)

// TestAgentsOnOneWorkdirShareItsWatcher: two captures on one workdir
// subscribed to one watch.Shared run one Watcher; each records every
// burst and every commit (the git events reach both); one that stops
// leaves the other watching with the same Watcher.
func TestAgentsOnOneWorkdirShareItsWatcher(t *testing.T) {
	var shared watch.Shared
	ob := testOptions(t)
	ob.Watches = &shared
	or := testOptions(t)
	or.Agent, or.Workdir, or.Watches = "reviewer", ob.Workdir, &shared
	wd := ob.Workdir
	gitIn(t, wd, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(wd, "a.txt"), "a")
	gitIn(t, wd, "add", "a.txt")
	gitIn(t, wd, "commit", "-q", "-m", "first")
	builder, reviewer := startCapture(t, ob), startCapture(t, or)
	if builder.Watching() == nil || builder.Watching() != reviewer.Watching() {
		t.Fatal("two agents on one workdir run two watchers")
	}
	w := builder.Watching()

	writeFile(t, filepath.Join(wd, "src", "main.go"), "package main\n")
	gitIn(t, wd, "add", ".")
	gitIn(t, wd, "commit", "-q", "-m", "the shared commit")
	for _, r := range []*running{builder, reviewer} {
		waitResume(t, r.store, "the burst and the commit", func(res capsule.Resume) bool {
			return slices.Contains(res.SinceLastVisit.Paths, "src/main.go") && hasReceipt("the shared commit")(res)
		})
	}

	builder.stop()
	writeFile(t, filepath.Join(wd, "src", "later.go"), "package main\n")
	waitResume(t, reviewer.store, "the later burst", func(res capsule.Resume) bool {
		return slices.Contains(res.SinceLastVisit.Paths, "src/later.go")
	})
	if shared.Watcher() != w || reviewer.Watching() != w {
		t.Fatal("the watcher changed when one of its agents stopped")
	}
	reviewer.stop()
	if shared.Watcher() != nil {
		t.Fatal("the watcher runs on after its last agent stopped")
	}
}
