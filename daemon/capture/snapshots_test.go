package capture

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestWorkRecordFollowsActivity: with work snapshots, the capture
// snapshots the tree as it starts (no record: nothing happened yet); a
// burst of changes then becomes a work record whose snapshot is a child of
// that one and lists the changed files, secret-redacted, and a receipt.
func TestWorkRecordFollowsActivity(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	o := testOptions(t)
	writeFile(t, filepath.Join(o.Workdir, "README.md"), "the tree as it starts\n")
	st, err := snapshot.Open(context.Background(), snapshot.Options{Dir: filepath.Join(o.Dir, "snapshots.git"), Workdir: o.Workdir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newCapture(t, o)
	taken := make(chan struct{}, 1)
	r.UseSnapshots(st, func() {
		select {
		case taken <- struct{}{}:
		default:
		}
	})
	startCaptureOf(t, r)
	select {
	case <-taken:
	case <-time.After(testwait.Limit):
		t.Fatalf("no start snapshot: %v", r.SnapshotError())
	}
	start, ok := st.Newest()
	if !ok || start.Trigger != TriggerStart {
		t.Fatalf("newest snapshot %+v: want the start snapshot", start)
	}

	writeFile(t, filepath.Join(o.Workdir, "src", "new-"+secretToken+".go"), "package src\n")
	var work *capsule.Work
	var ws []capsule.Write
	testwait.Until(t, func() string {
		return fmt.Sprintf("no work record after the change; log %+v, snapshot error %v", ws, r.SnapshotError())
	}, func() bool {
		var err error
		if ws, err = r.store.Pending(logReader, 0, 100); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.Kind == capsule.WriteWork {
				work = w.Work
			}
		}
		return work != nil
	})
	if work.Snapshot == nil || work.Snapshot.Parent != start.ID || work.Snapshot.Added != 1 {
		t.Fatalf("work record's snapshot %+v: want one file added since %s", work.Snapshot, start.ID)
	}
	if len(work.Files) != 1 || !strings.HasPrefix(work.Files[0].Path, "src/new-") || strings.Contains(work.Files[0].Path, "ghp_") ||
		work.Files[0].Status != "added" {
		t.Fatalf("work record's files %+v: want src/new-… added, its name redacted", work.Files)
	}
	receipt := work.Receipt()
	waitResume(t, r.store, "the work record's receipt", func(res capsule.Resume) bool { return slices.Contains(res.Receipts, receipt) })
	if h := r.Health()[2]; h.Name != "snapshots" || h.State != StateOK {
		t.Fatalf("snapshots component %+v", h)
	}
}
