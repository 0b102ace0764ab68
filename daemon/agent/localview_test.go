package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// A resume keeps the view it read of the capture and the snapshot store
// (localview.go) until a change it shows moves the view stamp. Here the
// view is kept for an hour, so each change below shows in the resume
// right after it only if it replaced the view: a snapshot taken, a path
// someone else changed, a visit, a conflict with another agent and the
// checkpoint that settles it. (The package's tests also run with
// CheckViews, which compares every kept view used with one read afresh.)
func TestResumeShowsEachChangeAtOnce(t *testing.T) {
	o, file := snapshotOptions(t)
	ledger := attribution.New(attribution.Options{Since: time.Now().Add(-time.Hour)})
	o.Capture.Attribution = ledger
	a := startAgent(t, o)
	a.views.fresh.Store(int64(time.Hour))
	ctx := context.Background()

	var r capsule.Resume
	testwait.Until(t, func() string { return fmt.Sprintf("resume's snapshot %+v", r.Snapshot) }, func() bool {
		r = a.LocalResume()
		return r.Snapshot != nil
	})
	keep := func() {
		t.Helper()
		a.LocalResume()
		if v := a.views.last.Load(); v == nil || a.view() != v {
			t.Fatal("the view is not kept between two resumes with nothing changed")
		}
	}

	keep()
	if err := os.WriteFile(file, []byte("package main // changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	took, err := a.SnapshotTake(ctx, a.g, []byte(`{"message":"by hand"}`))
	if err != nil || !took.New {
		t.Fatalf("snapshot: %+v (%v)", took, err)
	}
	if r = a.LocalResume(); r.Snapshot == nil || r.Snapshot.ID != took.Snapshot.ID {
		t.Fatalf("resume's snapshot %+v after snapshot %s was taken", r.Snapshot, took.Snapshot.ID)
	}

	keep()
	_, early := a.Resume(ctx, ResumeOptions{Local: true}) // told last, below
	if _, err := ledger.Burst(attribution.Burst{Paths: []string{"notes.md"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if r = a.LocalResume(); !slices.ContainsFunc(r.SinceLastVisit.ByOthers, func(o capsule.ByOther) bool { return o.Path == "notes.md" }) {
		t.Fatalf("by_others %+v after someone changed notes.md", r.SinceLastVisit.ByOthers)
	}
	keep()
	_, visit := a.Resume(ctx, ResumeOptions{Local: true})
	a.Visited(visit)
	if r = a.LocalResume(); len(r.SinceLastVisit.ByOthers) != 0 {
		t.Fatalf("by_others %+v after a visit that showed them", r.SinceLastVisit.ByOthers)
	}
	// A visit that began before the change, told after the later one
	// (two resumes at once): since_last_visit goes back to it.
	keep()
	a.Visited(early)
	if r = a.LocalResume(); !slices.ContainsFunc(r.SinceLastVisit.ByOthers, func(o capsule.ByOther) bool { return o.Path == "notes.md" }) {
		t.Fatalf("by_others %+v after an earlier visit was told last", r.SinceLastVisit.ByOthers)
	}

	// Each agent's edit is its tool's event, then the watcher's change.
	edit := func(agent string, at time.Time) {
		t.Helper()
		if _, err := ledger.Tool(attribution.ToolEvent{Agent: agent, Kind: attribution.KindEdit, Paths: []string{"shared.go"}, At: at}); err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.Burst(attribution.Burst{Paths: []string{"shared.go"}, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	edit("builder", time.Now().Add(-2*time.Minute))
	keep()
	edit("reviewer", time.Now().Add(-time.Minute))
	if r = a.LocalResume(); len(r.Conflicts) != 1 || r.Conflicts[0].Path != "shared.go" {
		t.Fatalf("conflicts %+v after another agent changed shared.go too", r.Conflicts)
	}
	keep()
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"settled"}`), true); err != nil {
		t.Fatal(err)
	}
	// The checkpoint settles the agent's open work once its commit is
	// told to the capture, just after the answer.
	testwait.Until(t, func() string { return fmt.Sprintf("conflicts %+v after the checkpoint", r.Conflicts) }, func() bool {
		r = a.LocalResume()
		return len(r.Conflicts) == 0
	})
}

// A view is kept at most viewFresh: what goes stale with time alone (the
// workdir's path, looked at again after a second) shows within it.
func TestResumeViewExpires(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	o := testOptions(t, t.TempDir())
	parent := t.TempDir()
	o.Config.Workdir = filepath.Join(parent, "wd")
	if err := os.Mkdir(o.Config.Workdir, 0o700); err != nil {
		t.Fatal(err)
	}
	o.Snapshots = &snapshot.Options{}
	a := startAgent(t, o)
	var r capsule.Resume
	testwait.Until(t, func() string { return fmt.Sprintf("resume's snapshot %+v", r.Snapshot) }, func() bool {
		r = a.LocalResume()
		return r.Snapshot != nil
	})
	if slices.Contains(r.Degraded, "snapshots") {
		t.Fatalf("degraded %v before the workdir moved", r.Degraded)
	}
	if err := os.Rename(o.Config.Workdir, filepath.Join(parent, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(o.Config.Workdir, 0o700); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, func() string { return fmt.Sprintf("degraded %v after the workdir was replaced", r.Degraded) }, func() bool {
		r = a.LocalResume()
		return slices.Contains(r.Degraded, "snapshots")
	})
}
