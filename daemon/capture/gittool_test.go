package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// component is r's component name as Health has it.
func component(r *running, name string) Component {
	for _, h := range r.Health() {
		if h.Name == name {
			return h
		}
	}
	return Component{}
}

// TestWorkLostDegradedWhenGitRefuses: run as root over a repository
// another user owns, git refuses it ("dubious ownership"): the work-lost
// checks cannot run, and instead of a WARN alone the agent shows degraded
// ["work_lost"] with git's reason; once git may read it (the repository
// is the daemon's user's again), the next check works and the agent is
// no longer degraded.
func TestWorkLostDegradedWhenGitRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a repository owned by another user needs root")
	}
	o := testOptions(t)
	gitIn(t, o.Workdir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(o.Workdir, "a.go"), "package a\n")
	gitIn(t, o.Workdir, "add", "-A")
	gitIn(t, o.Workdir, "commit", "-q", "-m", "a")
	chownTree(t, o.Workdir, 40001)
	r, _ := startWithSnapshots(t, o)
	testwait.Until(t, func() string { return fmt.Sprintf("health %+v", r.Health()) }, func() bool {
		h := component(r, "work_lost")
		return h.State == StateDegraded && strings.Contains(h.Detail, "dubious ownership")
	})
	if d := r.DegradedSources(); !slices.Contains(d, "work_lost") {
		t.Fatalf("DegradedSources = %v", d)
	}
	chownTree(t, o.Workdir, 0)
	writeFile(t, filepath.Join(o.Workdir, "b.go"), "package a // more\n")
	testwait.Until(t, func() string { return fmt.Sprintf("health %+v", r.Health()) }, func() bool {
		return component(r, "work_lost").State == StateOK
	})
	if d := r.DegradedSources(); slices.Contains(d, "work_lost") {
		t.Fatalf("DegradedSources = %v after a check that worked", d)
	}
}

func chownTree(t *testing.T, dir string, id int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, id, id)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPartialCloneDegradedOnOldGit: with a git too old to be kept from
// fetching (a git that says it is 2.39.3), the workdir's partial clone is
// refused by the work-lost checks and by the commits' receipts, both
// shown degraded with the reason, and none of the repository's programs
// runs.
func TestPartialCloneDegradedOnOldGit(t *testing.T) {
	o := testOptions(t)
	h := gittooltest.New(t, o.Workdir)
	h.MakePartialClone(t)
	st, err := snapshot.Open(context.Background(), snapshot.Options{Dir: filepath.Join(o.Dir, "snapshots.git"), Workdir: o.Workdir,
		Git: filepath.Join(gittooltest.OldGit(t, "2.39.3"), "git")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newCapture(t, o)
	r.UseSnapshots(st, nil)
	startCaptureOf(t, r)
	testwait.Until(t, func() string { return fmt.Sprintf("health %+v", r.Health()) }, func() bool {
		w, c := component(r, "work_lost"), component(r, "commits")
		return w.State == StateDegraded && strings.Contains(w.Detail, "partial clone") &&
			c.State == StateDegraded && strings.Contains(c.Detail, "partial clone")
	})
	if d := r.DegradedSources(); !slices.Contains(d, "work_lost") || !slices.Contains(d, "commits") {
		t.Fatalf("DegradedSources = %v", d)
	}
	r.stop()
	if f := h.Fired(); len(f) > 0 {
		t.Fatalf("ran %v", f)
	}
}
