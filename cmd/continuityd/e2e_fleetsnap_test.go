package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fleetHasObject reports whether the fleet's snapshot bucket holds name.
func fleetHasObject(url, name string) bool {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return false
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	obj, err := js.ObjectStore(ctx, "continuityd-snapshots")
	if err != nil {
		return false
	}
	_, err = obj.GetInfo(ctx, name)
	return err == nil
}

// newestSnapshot is the id resume names as the agent's newest snapshot.
func newestSnapshot(t *testing.T, p *proc) string {
	t.Helper()
	var id string
	fleetWait(t, 60*time.Second, "the start snapshot", func() bool {
		s, _ := fleetResumeDoc(t, p)["snapshot"].(map[string]any)
		id, _ = s["id"].(string)
		return id != ""
	})
	return id
}

// TestFleetSnapshotRestoreOnAnotherMachine: with `snapshots = true`, the
// snapshot daemon A takes is shipped to the fleet, and `continuityd
// snapshot restore ID` on daemon B (another state directory and workdir,
// whose store never had it) brings its files back.
func TestFleetSnapshotRestoreOnAnotherMachine(t *testing.T) {
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()

	wa := fleetWorkspace(t, url, "snapshots = true\n")
	workA := filepath.Join(wa.dir, "work")
	writeFile(t, workA, "main.go", "package main // from A\n")
	writeFile(t, workA, "notes/plan.md", "step 1\n")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	id := newestSnapshot(t, a)
	fleetWait(t, 60*time.Second, "the manifest in the bucket", func() bool {
		return fleetHasObject(url, "snap/builder/"+id)
	})
	a.terminate(t)

	wb := fleetWorkspace(t, url, "snapshots = true\n")
	workB := filepath.Join(wb.dir, "work")
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	defer b.terminate(t)
	env := []string{"CONTINUITYD_SOCKET=" + wb.socket}
	code, out, errOut := cli(t, env, "", "snapshot", "restore", id[:12])
	if code != 0 {
		t.Fatalf("restore on B: exit %d: %s %s", code, out, errOut)
	}
	if got := readFile(t, workB, "main.go"); got != "package main // from A\n" {
		t.Errorf("main.go on B = %q", got)
	}
	if got := readFile(t, workB, "notes/plan.md"); got != "step 1\n" {
		t.Errorf("notes/plan.md on B = %q", got)
	}
	// show answers from B's store now.
	if code, out, errOut := cli(t, env, "", "snapshot", "show", id[:12]); code != 0 || !strings.Contains(out, "main.go") {
		t.Errorf("show on B: exit %d: %s %s", code, out, errOut)
	}
	// An id neither B nor the fleet has is not found.
	if code, _, errOut := cli(t, env, "", "snapshot", "restore", "0123456789ab"); code == 0 || !strings.Contains(errOut, "nor in the fleet") {
		t.Errorf("unknown id on B: exit %d: %s", code, errOut)
	}
}
