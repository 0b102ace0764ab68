package capture

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// hasHeadMove accepts a resume whose since_last_visit.head holds a move of
// kind onto branch.
func hasHeadMove(kind, branch string) func(capsule.Resume) bool {
	return func(r capsule.Resume) bool {
		return slices.ContainsFunc(r.SinceLastVisit.Head, func(h capsule.HeadMove) bool { return h.Kind == kind && h.Branch == branch })
	}
}

// TestHeadMovesShowSinceLastVisit: a branch switch and a reset in the
// watched workdir show in since_last_visit.head (commits stay in commits),
// and a switch made while the daemon was down shows after the restart.
func TestHeadMovesShowSinceLastVisit(t *testing.T) {
	o := testOptions(t)
	wd := o.Workdir
	gitIn(t, wd, "init", "-q", "-b", "main")
	for _, f := range []string{"a.txt", "b.txt"} {
		writeFile(t, filepath.Join(wd, f), f)
		gitIn(t, wd, "add", f)
		gitIn(t, wd, "commit", "-q", "-m", "add "+f)
	}
	r := startCapture(t, o)

	gitIn(t, wd, "checkout", "-q", "-b", "feature")
	got := waitResume(t, r.store, "the switch to feature in since_last_visit.head", hasHeadMove(capsule.HeadBranchSwitch, "feature"))
	if h := got.SinceLastVisit.Head[0]; h.PrevBranch != "main" || h.From == "" || h.From != h.To {
		t.Errorf("switch %+v: want from main, HEAD's commit unchanged", h)
	}
	gitIn(t, wd, "reset", "-q", "--hard", "HEAD~1")
	got = waitResume(t, r.store, "the reset in since_last_visit.head", hasHeadMove(capsule.HeadMoved, "feature"))
	if len(got.SinceLastVisit.Commits) != 0 {
		t.Errorf("since_last_visit commits %q: a switch and a reset are not commits", got.SinceLastVisit.Commits)
	}
	md := got.Markdown(0)
	if !containsAll(md, "HEAD: ", "switched to feature", "feature moved from") {
		t.Errorf("markdown does not name the moves:\n%s", md)
	}

	// The daemon stops; someone switches back; the next run says so.
	r.stop()
	gitIn(t, wd, "checkout", "-q", "main")
	r2 := startCapture(t, o)
	waitResume(t, r2.store, "the switch made while the daemon was down", hasHeadMove(capsule.HeadBranchSwitch, "main"))
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
