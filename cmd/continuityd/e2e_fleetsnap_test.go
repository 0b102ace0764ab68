package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
)

// fleetHasObject reports whether the fleet's snapshot bucket holds name.
func fleetHasObject(t *testing.T, url, name string) bool {
	t.Helper()
	js, closeJS := fleetJS(t, url)
	defer closeJS()
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
	t.Parallel()
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()

	wa := fleetWorkspace(t, url, "snapshots = true\n")
	workA := filepath.Join(wa.dir, "work")
	writeFile(t, workA, "main.go", "package main // from A\n")
	writeFile(t, workA, "notes/plan.md", "step 1\n")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	id := newestSnapshot(t, a)
	fleetWait(t, 60*time.Second, "the manifest in the bucket", func() bool {
		return fleetHasObject(t, url, "snap/builder/"+id)
	})
	a.terminate(t)

	workB, env, _ := restoreOnMachineB(t, url, id, nil)
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

// restoreOnMachineB starts a second daemon for agent builder on the same
// fleet (another state directory and workdir: another machine), lets
// prepare write into its workdir first, and restores snapshot id there
// whole with the CLI. It returns B's workdir, the CLI's environment for B
// and what the restore printed; B runs until the test ends.
func restoreOnMachineB(t *testing.T, url, id string, prepare func(workB string)) (string, []string, string) {
	t.Helper()
	wb := fleetWorkspace(t, url, "snapshots = true\n")
	if prepare != nil {
		prepare(wb.work())
	}
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	t.Cleanup(func() { b.terminate(t) })
	env := []string{"CONTINUITYD_SOCKET=" + wb.socket}
	code, out, errOut := cli(t, env, "", "snapshot", "restore", id[:12], "--all")
	if code != 0 {
		t.Fatalf("restore on B: exit %d: %s %s", code, out, errOut)
	}
	return wb.work(), env, out
}

// fleetObjects reads every object of the fleet's snapshot bucket whole:
// name → content.
func fleetObjects(t *testing.T, url string) map[string]string {
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
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, in := range infos {
		data, err := obj.GetBytes(ctx, in.Name)
		if err != nil {
			t.Fatalf("reading %s: %v", in.Name, err)
		}
		out[in.Name] = string(data)
	}
	return out
}

// Credentials of the tests: realistic in shape, valid nowhere.
const (
	e2eAWSKey     = "AKIAZ7VRSQ5TJDNWXB3K"
	e2eAWSSecret  = "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"
	e2ePrivateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"
)

// TestFleetSnapshotWithholdsCredentials: with `snapshots = true`, a
// workdir's .env (an AWS key) and SSH private key never reach the object
// store, while the ordinary files do; the manifest and the log name them
// as withheld; a restore on another machine leaves that machine's own
// .env as it is and says so.
func TestFleetSnapshotWithholdsCredentials(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()

	wa := fleetWorkspace(t, url, "snapshots = true\n")
	workA := filepath.Join(wa.dir, "work")
	writeFile(t, workA, "main.go", "package main // ordinary code from A\n")
	writeFile(t, workA, "notes/plan.md", "step 1: ordinary notes from A\n")
	writeFile(t, workA, ".env", "AWS_ACCESS_KEY_ID="+e2eAWSKey+"\nAWS_SECRET_ACCESS_KEY="+e2eAWSSecret+"\n")
	writeFile(t, workA, ".ssh/id_ed25519", e2ePrivateKey)
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	id := newestSnapshot(t, a)
	fleetWait(t, 20*time.Second, "the manifest in the bucket", func() bool {
		return fleetHasObject(t, url, "snap/builder/"+id)
	})

	objects := fleetObjects(t, url)
	var all strings.Builder
	for name, content := range objects {
		all.WriteString(name + "\x00" + content + "\x00")
	}
	for _, leak := range []string{e2eAWSKey, e2eAWSSecret, "b3BlbnNzaC1rZXktdjEAAAAA", "OPENSSH PRIVATE KEY"} {
		if strings.Contains(all.String(), leak) {
			t.Errorf("the object store holds %q", leak)
		}
	}
	for _, content := range []string{"package main // ordinary code from A\n", "step 1: ordinary notes from A\n"} {
		if !strings.Contains(all.String(), content) {
			t.Errorf("the object store lacks the ordinary file %q", content)
		}
	}
	manifest := objects["snap/builder/"+id]
	for _, want := range []string{`"path":".env"`, `"path":".ssh/id_ed25519"`, "environment file", "SSH private key"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("the manifest does not say %s: %s", want, manifest)
		}
	}
	fleetWait(t, 10*time.Second, "the log naming the withheld files", func() bool {
		s := a.stderr.String()
		return strings.Contains(s, "without the files that stay on this machine") && strings.Contains(s, ".ssh/id_ed25519")
	})
	a.terminate(t)

	workB, env, out := restoreOnMachineB(t, url, id, func(workB string) { writeFile(t, workB, ".env", "B_OWN=1\n") })
	if got := readFile(t, workB, "main.go"); got != "package main // ordinary code from A\n" {
		t.Errorf("main.go on B = %q", got)
	}
	if got := readFile(t, workB, ".env"); got != "B_OWN=1\n" {
		t.Errorf("B's own .env after the restore = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(workB, ".ssh", "id_ed25519")); err == nil {
		t.Errorf("the private key reached B")
	}
	if !strings.Contains(out, "left alone .env: withheld from the fleet") || !strings.Contains(out, "left alone .ssh/id_ed25519: withheld") {
		t.Errorf("the restore does not say the withheld files were left alone:\n%s", out)
	}
	if _, out, _ := cli(t, env, "", "snapshot", "show", id[:12]); !strings.Contains(out, "withheld from the fleet (an environment file (.env*)): .env") {
		t.Errorf("show on B does not name the withheld files:\n%s", out)
	}
}

// patternReader yields size bytes of a fixed pattern (byte i is i mod
// 251), generated as read.
type patternReader struct{ off, size int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-p.off)]
	// One period byte by byte, the rest copied from what is written (the
	// pattern repeats every 251 bytes): a loop over every byte costs the
	// race detector's run seconds for each pass over a 256 MiB blob.
	n := min(len(b), 251)
	for i := range n {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
	p.off += int64(len(b))
	return len(b), nil
}

// gitID is git's name of an object whose content gen yields.
func gitID(typ string, size int64, content io.Reader) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, size)
	io.Copy(h, content)
	return hex.EncodeToString(h.Sum(nil))
}

// forgeSnapshot puts into the fleet's bucket, as a fleet member could, a
// snapshot of agent builder holding one file, big.bin, of size bytes of
// the pattern (streamed, never whole in memory). With badHash the object
// stored under the blob's name holds other bytes. It returns the id.
func forgeSnapshot(t *testing.T, url string, size int64, badHash bool) string {
	t.Helper()
	js, closeJS := fleetJS(t, url)
	defer closeJS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "continuityd-snapshots", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, r io.Reader) {
		if _, err := obj.Put(ctx, jetstream.ObjectMeta{Name: name}, r); err != nil {
			t.Fatalf("putting %s: %v", name, err)
		}
	}
	blob := gitID("blob", size, &patternReader{size: size})
	content := io.Reader(&patternReader{size: size})
	if badHash {
		content = io.MultiReader(strings.NewReader("forged"), io.LimitReader(&patternReader{size: size}, size-6))
	}
	put("git/"+blob, content)
	raw, _ := hex.DecodeString(blob)
	tree := "100644 big.bin\x00" + string(raw)
	treeID := gitID("tree", int64(len(tree)), strings.NewReader(tree))
	put("git/"+treeID, strings.NewReader(tree))
	commit := "tree " + treeID + "\nauthor continuityd <continuityd@localhost> 1764583200 +0000\ncommitter continuityd <continuityd@localhost> 1764583200 +0000\n\n" +
		"continuityd-snapshot v=1 n=1 trigger=quiet seq=1 time=2026-12-01T10:00:00Z parent=- added=1 modified=0 deleted=0 skipped=0\n"
	commitID := gitID("commit", int64(len(commit)), strings.NewReader(commit))
	put("git/"+commitID, strings.NewReader(commit))
	manifest := fmt.Sprintf(`{"v":1,"agent":"builder","machine":"forger","id":%q,"tree":%q,"at":"2026-12-01T10:00:00Z","trigger":"quiet","seq":1,"files":1,`+
		`"objects":[{"id":%q,"type":"commit"},{"id":%q,"type":"tree"},{"id":%q,"type":"blob"}],"uploaded":"2026-12-01T10:00:00Z"}`,
		commitID, treeID, commitID, treeID, blob)
	put("snap/builder/"+commitID, strings.NewReader(manifest))
	return commitID
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// showFromFleet asks daemon p for snapshot id (fetched from the fleet)
// and returns the HTTP status and the answer.
func showFromFleet(t *testing.T, p *proc, id string) (int, string) {
	t.Helper()
	c := p.client()
	c.Timeout = 2 * time.Minute
	resp, err := c.Get("http://d/v1/snapshots/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestFleetSnapshotUntrustedObjects: what the fleet sends is checked as it
// arrives. A forged snapshot whose blob is over max_file_size, or whose
// blob does not hash to its name, is refused with 502
// FLEET_SNAPSHOT_DAMAGED (not FLEET_UNAVAILABLE … retry) and not
// imported; a 256 MiB blob within the limit is fetched with the daemon's
// peak memory bounded far below its size.
func TestFleetSnapshotUntrustedObjects(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/PID/status")
	}
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()
	const huge = 256 << 20
	hugeID := forgeSnapshot(t, url, huge, false)
	badID := forgeSnapshot(t, url, 4096, true)

	// The default max_file_size (8 MiB) applies to imports.
	wa := fleetWorkspace(t, url, "snapshots = true\n")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	for _, c := range []struct{ id, want string }{{hugeID, "max_file_size"}, {badID, "hashes to"}} {
		status, body := showFromFleet(t, a, c.id)
		if status != 502 || !strings.Contains(body, "FLEET_SNAPSHOT_DAMAGED") || !strings.Contains(body, c.want) {
			t.Errorf("show of a forged snapshot: %d %s, want 502 FLEET_SNAPSHOT_DAMAGED saying %q", status, body, c.want)
		}
	}
	env := []string{"CONTINUITYD_SOCKET=" + wa.socket}
	if code, _, errOut := cli(t, env, "", "snapshot", "restore", badID[:12]); code == 0 || !strings.Contains(errOut, "FLEET_SNAPSHOT_DAMAGED") {
		t.Errorf("restore of a forged snapshot: exit %d: %s", code, errOut)
	}
	a.terminate(t)

	// Without a limit, the 256 MiB blob comes in streamed.
	wb := fleetWorkspace(t, url, "snapshots = true\n\n[snapshots]\nmax_file_size = 0\n")
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	defer b.terminate(t)
	before := vmHWM(t, b.cmd.Process.Pid)
	status, body := showFromFleet(t, b, hugeID)
	if status != 200 || !strings.Contains(body, "big.bin") {
		t.Fatalf("show of the 256 MiB snapshot: %d %s", status, body)
	}
	peak := vmHWM(t, b.cmd.Process.Pid)
	t.Logf("daemon peak RSS: %d MiB before the fetch, %d MiB after a %d MiB blob", before>>20, peak>>20, huge>>20)
	if peak > 150<<20 {
		t.Errorf("the daemon's peak RSS reached %d MiB fetching a %d MiB blob; want under 150 MiB", peak>>20, huge>>20)
	}
}

// TestFleetSnapshotWorkRecordNamesWithheld: the work record of a snapshot
// the fleet gets names the files kept off it, and why.
func TestFleetSnapshotWorkRecordNamesWithheld(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	w := fleetDaemon{
		upstreams: []string{"local", "fleet"},
		fleet:     "snapshots = true\n",
		more:      "\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n",
	}.workspace(t, srv.ClientURL())
	work := w.work()
	writeFile(t, work, "main.go", "package main\n")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.terminate(t)
	newestSnapshot(t, p)
	writeFile(t, work, "main.go", "package main\n\nfunc main() {}\n")
	writeFile(t, work, ".env.production", "AWS_ACCESS_KEY_ID="+e2eAWSKey+"\n")
	rec := waitWork(t, filepath.Join(w.state, "agents", "builder"), 40*time.Second, func(w *capsule.Work) bool {
		return w.Snapshot != nil && workFile(w, ".env.production") != nil
	})
	ws := rec.Work.Snapshot
	if ws.WithheldCount != 1 || len(ws.Withheld) != 1 || ws.Withheld[0].Path != ".env.production" || !strings.Contains(ws.Withheld[0].Reason, ".env") {
		t.Errorf("the work record's withheld files: %d %+v, want .env.production", ws.WithheldCount, ws.Withheld)
	}
}

// TestSnapshotGCFailureShowsDegraded: a garbage collection of the
// snapshot store that fails (here: git repack cannot read its settings) shows as
// degraded ["snapshots"] with the reason in status, and clears when the
// next one works.
func TestSnapshotGCFailureShowsDegraded(t *testing.T) {
	w, work := snapshotWorkspace(t, "[snapshots]\nkeep = 1\n")
	writeFile(t, work, "a.txt", "one\n")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.terminate(t)
	c := p.client()
	defer c.CloseIdleConnections()
	first := newestSnapshot(t, p)

	// A setting only git repack reads, made unreadable: the store's
	// snapshots go on, its garbage collection fails.
	store := filepath.Join(w.state, "agents", "builder", "snapshots.git")
	storeGit(t, store, "config", "pack.depth", "not-a-number")
	writeFile(t, work, "a.txt", "two\n")
	var problem string
	fleetWait(t, 40*time.Second, "status degraded [\"snapshots\"] after the gc failed", func() bool {
		a := get(t, c, "/v1/status")["agents"].([]any)[0].(map[string]any)
		problem, _ = a["snapshot_problem"].(string)
		return degradedHas(a, "snapshots") && problem != ""
	})
	if !strings.Contains(problem, "garbage collection") {
		t.Errorf("snapshot_problem = %q, want it to name the garbage collection", problem)
	}
	if _, out, _ := cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "status"); !strings.Contains(out, `degraded ["snapshots"]: garbage collection`) {
		t.Errorf("`continuityd status` does not say why:\n%s", out)
	}
	if newestSnapshot(t, p) == first {
		t.Errorf("no snapshot was taken")
	}

	// Repaired: the next gc works and the agent is whole again.
	storeGit(t, store, "config", "--unset", "pack.depth")
	writeFile(t, work, "a.txt", "three\n")
	fleetWait(t, 40*time.Second, "degraded cleared after a gc that works", func() bool {
		a := get(t, c, "/v1/status")["agents"].([]any)[0].(map[string]any)
		return !degradedHas(a, "snapshots") && a["snapshot_problem"] == nil
	})
}
