package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestSnapshotOperations: with snapshots on, the agent snapshots its
// workdir as it starts (real git, in its state directory); list, show and
// diff read it ("latest" is the newest); an id the store lacks is
// NOT_FOUND naming the id; a restore first snapshots the tree as it is, so
// it can be undone, then writes the files back.
func TestSnapshotOperations(t *testing.T) {
	o, file := snapshotOptions(t)
	a := startAgent(t, o)
	ctx := context.Background()
	var list []ops.Snapshot
	testwait.Until(t, func() string { return fmt.Sprintf("snapshots %+v", list) }, func() bool {
		var err error
		list, err = a.SnapshotList(ctx)
		return err == nil && len(list) == 1
	})
	start := list[0]
	if start.Trigger != capture.TriggerStart {
		t.Fatalf("first snapshot %+v: want the start snapshot", start)
	}
	d, err := a.SnapshotShow(ctx, Latest)
	if err != nil || d.ID != start.ID || len(d.Files) != 1 || d.Files[0].Path != "main.go" {
		t.Fatalf("show latest: %+v (%v)", d, err)
	}
	diff, err := a.SnapshotDiff(ctx, "", "", 0)
	if err != nil || diff.ID != start.ID || !strings.Contains(diff.Diff, "+package main") {
		t.Fatalf("diff of the newest: %+v (%v)", diff, err)
	}
	_, err = a.SnapshotShow(ctx, strings.Repeat("0", len(start.ID)))
	if ce := refusal(t, err, capsule.CodeNotFound); ce.Field != "id" {
		t.Fatalf("unknown id: field %q", ce.Field)
	}
	if r := a.LocalResume(); r.Snapshot == nil || r.Snapshot.ID != start.ID {
		t.Fatalf("resume's snapshot %+v: want %s", r.Snapshot, start.ID)
	}

	if err := os.WriteFile(file, []byte("package broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dry, err := a.SnapshotRestore(ctx, start.ID, []byte(`{"dry_run":true,"all":true}`))
	if err != nil || !dry.DryRun || len(dry.Changes) != 1 || dry.Safety != "" {
		t.Fatalf("dry run: %+v (%v)", dry, err)
	}
	if got, _ := os.ReadFile(file); string(got) != "package broken\n" {
		t.Fatalf("a dry run wrote the file: %q", got)
	}
	res, err := a.SnapshotRestore(ctx, start.ID, []byte(`{"all":true}`))
	if err != nil || res.Safety == "" || res.Safety == start.ID || len(res.Changes) != 1 {
		t.Fatalf("restore: %+v (%v): want the tree snapshotted first, then main.go written back", res, err)
	}
	if got, _ := os.ReadFile(file); string(got) != "package main\n" {
		t.Fatalf("after the restore main.go is %q", got)
	}
	// The safety snapshot undoes the restore.
	if _, err := a.SnapshotRestore(ctx, res.Safety, []byte(`{"all":true}`)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); string(got) != "package broken\n" {
		t.Fatalf("after undoing the restore main.go is %q", got)
	}
}
