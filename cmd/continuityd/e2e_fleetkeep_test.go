package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/daemon/fleetsnap"
)

// keepDaemon is a fleet daemon for retention: agent name shipping its
// snapshots, 2 kept, its policy snapshotting within a second of an edit.
func keepDaemon(t *testing.T, url, name string) *workspace {
	t.Helper()
	return fleetDaemon{agent: name, fleet: "conflict_window = \"1m\"\nsnapshots = true\n",
		more: quickOutbox + "\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n\n[snapshots]\nkeep = 2\n"}.workspace(t, url)
}

// nextSnapshot waits for a snapshot newer than prev in resume, and for
// its manifest in the fleet's bucket.
func nextSnapshot(t *testing.T, p *proc, url, agent, prev string) string {
	t.Helper()
	var id string
	fleetWait(t, 60*time.Second, "a snapshot after "+prev, func() bool {
		s, _ := fleetResumeDoc(t, p)["snapshot"].(map[string]any)
		id, _ = s["id"].(string)
		return id != "" && id != prev
	})
	fleetWait(t, 60*time.Second, "the manifest of "+id, func() bool { return fleetHasObject(t, url, "snap/"+agent+"/"+id) })
	return id
}

// bucketView is the snapshot bucket as the test reads it: its objects and,
// per manifest, the objects it names.
type bucketView struct {
	objects   map[string]bool
	manifests map[string][]string
}

func readBucket(t *testing.T, url string) bucketView {
	t.Helper()
	js, closeJS := fleetJS(t, url)
	defer closeJS()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	obj, err := js.ObjectStore(ctx, "continuityd-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obj.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	v := bucketView{objects: map[string]bool{}, manifests: map[string][]string{}}
	for _, in := range infos {
		if !strings.HasPrefix(in.Name, "snap/") {
			v.objects[in.Name] = true
			continue
		}
		data, err := obj.GetBytes(ctx, in.Name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			continue // dropped since the listing
		}
		if err != nil {
			t.Fatalf("reading %s: %v", in.Name, err)
		}
		var m struct{ Objects []struct{ ID string } }
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("manifest %s: %v", in.Name, err)
		}
		v.manifests[in.Name] = []string{}
		for _, o := range m.Objects {
			v.manifests[in.Name] = append(v.manifests[in.Name], "git/"+o.ID)
		}
	}
	return v
}

// needed are the objects the manifests name.
func (v bucketView) needed() map[string]bool {
	out := map[string]bool{}
	for _, objs := range v.manifests {
		for _, o := range objs {
			out[o] = true
		}
	}
	return out
}

func (v bucketView) of(agent string) int {
	n := 0
	for name := range v.manifests {
		if strings.HasPrefix(name, "snap/"+agent+"/") {
			n++
		}
	}
	return n
}

// TestFleetSnapshotRetention: machine A's agent takes four snapshots with
// keep = 2; its manifests in the fleet drop to the newest two and the
// bucket's objects shrink to exactly what the manifests name. The object
// of A's first file is unreferenced then: A's retention is held just as
// it is about to delete it while machine B ships a snapshot holding the
// same file (B finds the object there and names it); let go, A keeps it,
// and B's snapshot is whole. `continuityd fleet` shows the bucket's size.
func TestFleetSnapshotRetention(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()
	fifo := filepath.Join(t.TempDir(), "hold")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const first = "alpha v1\n"
	racing := "git/" + gitID("blob", int64(len(first)), strings.NewReader(first))
	grace := fleetsnap.GraceEnv + "=8s"

	wa := keepDaemon(t, url, "builder")
	writeFile(t, wa.work(), "f.txt", first)
	a := startProc(t, wa.socket, []string{grace, fleetsnap.HoldEnv + "=" + racing + " " + fifo}, "run", "--config", wa.config)
	id := nextSnapshot(t, a, url, "builder", "")
	for _, v := range []string{"alpha v2\n", "alpha v3\n", "alpha v4\n"} {
		writeFile(t, wa.work(), "f.txt", v)
		id = nextSnapshot(t, a, url, "builder", id)
	}
	// A's retention finds the first file's object unreferenced and old,
	// and waits there.
	fleetWait(t, 90*time.Second, "A's retention about to delete "+racing, func() bool {
		_, err := os.Stat(fifo + ".held")
		return err == nil
	})
	if v := readBucket(t, url); v.of("builder") != 2 || !v.objects[racing] {
		t.Fatalf("before B: builder has %d manifests (want 2), %s there: %v", v.of("builder"), racing, v.objects[racing])
	}

	// Machine B ships a snapshot holding the same file meanwhile.
	wb := keepDaemon(t, url, "tester")
	writeFile(t, wb.work(), "g.txt", first)
	b := startProc(t, wb.socket, []string{grace}, "run", "--config", wb.config)
	nextSnapshot(t, b, url, "tester", "")
	release, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	release.Close()

	// The bucket shrinks to what the manifests name, B's included.
	var v bucketView
	for deadline := time.Now().Add(90 * time.Second); ; {
		v = readBucket(t, url)
		if v.objects[racing] && v.of("builder") == 2 && v.of("tester") == 1 && maps.Equal(v.objects, v.needed()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket's objects are not what the manifests name (%s there: %v): objects %v, manifests %v",
				racing, v.objects[racing], slices.Sorted(maps.Keys(v.objects)), v.manifests)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(a.stderr.String(), "fleet snapshot retention") {
		t.Errorf("A's log does not say what retention did:\n%s", a.stderr)
	}

	out, code := fleetCLI(t, "fleet", "--socket", wa.socket, "--json")
	var ans struct {
		Snapshots struct {
			Bucket    string
			Bytes     int64
			Objects   int
			Manifests int
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil || ans.Snapshots.Objects != len(v.objects) ||
		ans.Snapshots.Manifests != 3 || ans.Snapshots.Bytes <= 0 || ans.Snapshots.Bucket != "continuityd-snapshots" {
		t.Fatalf("fleet --json (%d) for %d objects, 3 manifests: %s", code, len(v.objects), out)
	}
	out, code = fleetCLI(t, "fleet", "--socket", wa.socket)
	if code != 0 || !strings.Contains(out, "snapshots: bucket continuityd-snapshots") || !strings.Contains(out, "and 3 manifests") {
		t.Fatalf("fleet (%d):\n%s", code, out)
	}
}
