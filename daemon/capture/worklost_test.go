package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/worklost"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestRestoreByAnotherAgentIsNoLoss: two agents on one workdir, each with
// its own snapshot store, share a RestoreGate. A restore by one that takes
// uncommitted work (held by both agents' snapshots) out of the tree is no
// loss for either: the other agent's check knows of it too.
func TestRestoreByAnotherAgentIsNoLoss(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	gate := &RestoreGate{}
	o1 := testOptions(t)
	o2 := testOptions(t)
	o2.Agent, o2.Workdir = "reviewer", o1.Workdir
	o1.RestoreGate, o2.RestoreGate = gate, gate
	work := o1.Workdir
	writeFile(t, filepath.Join(work, "a.go"), "committed\n")
	gitIn(t, work, "init", "-q", "-b", "main")
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-q", "-m", "start")

	type agent struct {
		r     *running
		st    *snapshot.Store
		start string
	}
	var agents []*agent
	for _, o := range []Options{o1, o2} {
		r, st := startWithSnapshots(t, o)
		agents = append(agents, &agent{r: r, st: st})
	}
	// holds waits until each agent's newest snapshot has new.go as want
	// says ("" : absent).
	holds := func(when, want string) {
		t.Helper()
		for _, a := range agents {
			var newest snapshot.Snapshot
			testwait.Until(t, func() string { return fmt.Sprintf("%s: %s's newest snapshot %+v", when, a.r.o.Agent, newest) }, func() bool {
				var ok bool
				if newest, ok = a.st.Newest(); !ok {
					return false
				}
				if a.start == "" {
					a.start = newest.ID
					return want == ""
				}
				changes, err := a.st.Between(ctx, a.start, newest.ID)
				if err != nil {
					t.Fatal(err)
				}
				held := false
				for _, c := range changes {
					held = held || c.Path == "new.go" && c.NewID != ""
				}
				return held == (want != "")
			})
		}
	}
	holds("the start snapshots", "")
	writeFile(t, filepath.Join(work, "new.go"), "an hour of work\n")
	holds("new.go written", "an hour of work\n")
	res, err := agents[0].r.Restoring(func() (snapshot.RestoreResult, error) {
		return agents[0].st.Restore(ctx, agents[0].start, []string{"new.go"}, false)
	})
	if err != nil || len(res.Changes) != 1 {
		t.Fatalf("restore: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(work, "new.go")); err == nil {
		t.Fatal("the restore left new.go")
	}
	holds("the restore took new.go away", "")
	for _, a := range agents {
		if wl := a.r.WorkLost(); len(wl) != 0 || a.r.WorkLostFound() != 0 {
			t.Errorf("%s: a restore by the daemon counted as lost work: %+v", a.r.o.Agent, wl)
		}
	}
}

// TestWorkLostReadsDoNotWaitForASnapshot: while a snapshot and its check
// hold the gate (the start snapshot of a large tree takes minutes), resume
// (WorkLost), the metric and a checkpoint (run on the residency's writer)
// still answer at once.
func TestWorkLostReadsDoNotWaitForASnapshot(t *testing.T) {
	r := newCapture(t, testOptions(t))
	r.lost.gate.Lock() // a snapshot under way
	defer r.lost.gate.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.WorkLost()
		r.WorkLostFound()
		r.ExplicitCheckpoint()
	}()
	finished := false
	testwait.Until(t, func() string { return "resume, metrics or a checkpoint waited for the snapshot under way" }, func() bool {
		select {
		case <-done:
			finished = true
		default:
		}
		return finished
	})
}

// TestWorkLostPointIsNotSyncedEachSnapshot: a check that finds nothing
// moves the point checked last in worklost-last.json (replaced, not
// synced) and leaves worklost.json, synced at each change of the losses,
// alone; the next run checks from the newer of the two points, and from
// worklost.json's when worklost-last.json does not decode (a power loss
// can leave an unsynced file so).
func TestWorkLostPointIsNotSyncedEachSnapshot(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	o := testOptions(t)
	work := o.Workdir
	writeFile(t, filepath.Join(work, "a.go"), "committed\n")
	gitIn(t, work, "init", "-q", "-b", "main")
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-q", "-m", "start")
	r, st := startWithSnapshots(t, o)

	read := func(name string, v any) bool {
		raw, err := os.ReadFile(filepath.Join(o.Dir, name))
		return err == nil && json.Unmarshal(raw, v) == nil
	}
	var kept lossState
	testwait.Until(t, func() string { return fmt.Sprintf("worklost.json holds %+v", kept) }, func() bool {
		newest, ok := st.Newest()
		return ok && read(lossesFile, &kept) && kept.Last.Snapshot == newest.ID
	})
	start := kept.Last.Snapshot
	writeFile(t, filepath.Join(work, "b.go"), "new work\n")
	var last lastPoint
	testwait.Until(t, func() string { return fmt.Sprintf("worklost-last.json holds %+v (start %s)", last, start) }, func() bool {
		newest, ok := st.Newest()
		return ok && newest.ID != start && read(lastPointFile, &last) && last.Last.Snapshot == newest.ID
	})
	if !read(lossesFile, &kept) || kept.Last.Snapshot != start || kept.Gen >= last.Gen {
		t.Fatalf("worklost.json was rewritten for a check that found nothing: %+v (last point %+v)", kept, last)
	}

	loaded := func() worklost.Point {
		o := o
		o.Store = r.store
		c := New(o)
		c.loadLosses()
		return c.lost.kept.Last
	}
	if got := loaded(); got != last.Last {
		t.Fatalf("the next run checks from %+v, want the newer point %+v", got, last.Last)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, lastPointFile), []byte("\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := loaded(); got != kept.Last {
		t.Fatalf("with worklost-last.json damaged the next run checks from %+v, want worklost.json's %+v", got, kept.Last)
	}
}

// TestLostOutlivesItsListing: a loss the agent checkpointed past leaves
// resume, but its id still finds it (the command the agent was given
// goes on working), with its names as they are in the tree; retired
// losses are bounded. Resume shows each name in its exact form, a
// secret-shaped one redacted, and the commands by id and by path.
func TestLostOutlivesItsListing(t *testing.T) {
	r := newCapture(t, testOptions(t))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	secret := "key-" + "ghp_Zt8QmW3kP9xR2vN7bL5cY1hJ4dF6gS0aE8uK" + ".txt"
	names := []string{"bad\xff.txt", "line\nbreak", secret}
	loss := capsule.WorkLost{ID: worklost.ID("0123abcd", at), At: at, Snapshot: "0123abcd", Paths: names}
	r.lost.mu.Lock()
	r.lost.kept.Entries = []capsule.WorkLost{loss}
	r.lost.mu.Unlock()

	shown := r.WorkLost()
	if len(shown) != 1 {
		t.Fatalf("WorkLost = %+v", shown)
	}
	s := shown[0]
	if s.ID != loss.ID || s.Restore != "continuityd snapshot restore --lost "+loss.ID+" --agent builder" ||
		s.Paths[0] != `"bad\377.txt"` || s.Paths[1] != "line\nbreak" || strings.Contains(s.Paths[2], "ghp_") ||
		strings.Contains(s.RestorePaths, "ghp_") || !strings.Contains(s.RestorePaths, `--path '"bad\377.txt"' --path '"line\nbreak"'`) {
		t.Errorf("shown: %+v", s)
	}

	r.checkpointed(at.Add(time.Second))
	if got := r.WorkLost(); len(got) != 0 {
		t.Errorf("after a checkpoint resume still lists %+v", got)
	}
	got, ok := r.Lost(loss.ID)
	if !ok || !slices.Equal(got.Paths, names) || got.Snapshot != loss.Snapshot {
		t.Errorf("Lost(%s) after a checkpoint = %+v, %v", loss.ID, got, ok)
	}
	if _, ok := r.Lost("wl-000000000000"); ok {
		t.Error("an unknown id was found")
	}

	r.lost.mu.Lock()
	for i := range maxPastLosses {
		at := at.Add(time.Duration(i+1) * time.Minute)
		r.retire(capsule.WorkLost{ID: worklost.ID("0123abcd", at), At: at, Snapshot: "0123abcd", Paths: []string{"a"}})
	}
	n := len(r.lost.kept.Past)
	r.lost.mu.Unlock()
	if _, ok := r.Lost(loss.ID); ok || n != maxPastLosses {
		t.Errorf("%d losses retired: %d kept, the oldest still found: %v", maxPastLosses+1, n, ok)
	}
}
