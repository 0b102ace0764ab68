package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/testkit/holdgit"
)

// killTreeFiles is the size of the tree the kill test snapshots. Its size
// does not time the kill (a git wrapper holds the snapshot for it); the
// tree is many files so that a listed snapshot is seen to be whole.
const killTreeFiles = 200

func killTreeFile(i int) string { return fmt.Sprintf("big/d%02d/f%03d.txt", i/100, i%100) }

// killTreeText is file i's content in round r: a first line naming both,
// then 8 KiB of text that differs by file and round (git stores a new
// object for each).
func killTreeText(r, i int) string {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(i)))
	var b strings.Builder
	fmt.Fprintf(&b, "round %d file %d\n", r, i)
	const letters = "abcdefghijklmnopqrstuvwxyz      \n"
	for b.Len() < 8<<10 {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// writeKillTree writes every file of the tree as it is in round r into
// work/big. The tree is written beside the workdir in stage and moved in
// with one rename, so that no snapshot (a quiet period can pass during a
// slow write on a loaded machine) sees half a round.
func writeKillTree(t *testing.T, work, stage string, r int) {
	t.Helper()
	os.RemoveAll(stage)
	for i := range killTreeFiles {
		writeFile(t, stage, killTreeFile(i), killTreeText(r, i))
	}
	old := stage + ".old"
	if err := os.Rename(filepath.Join(work, "big"), old); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(stage, "big"), filepath.Join(work, "big")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(old)
}

// storeGit runs git on the daemon's snapshot store, read only, with no
// user or system configuration.
func storeGit(t *testing.T, store string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + store}, args...)...)
	cmd.Env = userGitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s on the store: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after ")".
		s := string(stat)
		if k := strings.LastIndexByte(s, ')'); k >= 0 {
			if f := strings.Fields(s[k+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

// alive reports whether pid is a process that has not ended (a zombie
// has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	k := strings.LastIndexByte(s, ')')
	return k < 0 || !strings.HasPrefix(strings.TrimSpace(s[k+1:]), "Z")
}

// listedSnapshots is GET /v1/snapshots: the ids, newest first.
func listedSnapshots(t *testing.T, p *proc) []string {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	var ids []string
	list, _ := get(t, c, "/v1/snapshots")["snapshots"].([]any)
	for _, s := range list {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	return ids
}

// checkWholeSnapshots checks every snapshot the daemon lists: `show`
// answers, and the store holds the whole tree of one round, every file
// of it readable (no half snapshot: each listed one is a tree written
// whole before its ref).
func checkWholeSnapshots(t *testing.T, p *proc, store string, ids []string, when string) {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	for _, id := range ids {
		resp, err := c.Get("http://d/v1/snapshots/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: show of listed snapshot %s: %d", when, id, resp.StatusCode)
		}
		names := strings.Split(storeGit(t, store, "ls-tree", "-r", "--name-only", id), "\n")
		if n := len(names); n < killTreeFiles {
			t.Fatalf("%s: listed snapshot %s holds %d files, want the whole tree (%d)", when, id, n, killTreeFiles)
		}
		first := storeGit(t, store, "cat-file", "blob", id+":"+killTreeFile(0))
		var r int
		if _, err := fmt.Sscanf(first, "round %d file 0\n", &r); err != nil {
			t.Fatalf("%s: snapshot %s: %s holds %.40q", when, id, killTreeFile(0), first)
		}
		for _, i := range []int{1, killTreeFiles / 2, killTreeFiles - 1} {
			if got := storeGit(t, store, "cat-file", "blob", id+":"+killTreeFile(i)); got != strings.TrimSpace(killTreeText(r, i)) {
				t.Fatalf("%s: snapshot %s: %s is not the file of round %d", when, id, killTreeFile(i), r)
			}
		}
	}
	code, out, errOut := cli(t, []string{"CONTINUITYD_SOCKET=" + p.socket}, "", "snapshot", "list")
	if code != 0 {
		t.Fatalf("%s: continuityd snapshot list: exit %d: %s", when, code, errOut)
	}
	for _, id := range ids {
		if !strings.Contains(out, id[:12]) {
			t.Fatalf("%s: continuityd snapshot list lacks %s:\n%s", when, id, out)
		}
	}
}

// waitSnapshots waits until the daemon lists want snapshots.
func waitSnapshots(t *testing.T, p *proc, want int, within time.Duration, when string) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ids := listedSnapshots(t, p)
		if len(ids) == want {
			return ids
		}
		if len(ids) > want || time.Now().After(deadline) {
			t.Fatalf("%s: the daemon lists %d snapshots, want %d; log:\n%s", when, len(ids), want, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitWatching waits until the daemon's workdir watcher holds a watch on
// every directory of the kill tree (the workdir, big/ and its dNN/): a
// tree swapped in before that would go unseen, and no snapshot follow.
func waitWatching(t *testing.T, p *proc, when string) {
	t.Helper()
	want := 2 + (killTreeFiles+99)/100
	const gauge = `continuityd_watcher_watched_dirs{agent="builder"} `
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := -1
		for line := range strings.SplitSeq(fleetMetrics(t, p), "\n") {
			if v, ok := strings.CutPrefix(line, gauge); ok {
				n, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the watcher holds %d watches, want %d; log:\n%s", when, n, want, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSnapshotSIGKILLMidSnapshot (issue 14): a daemon taking a work
// snapshot is killed with SIGKILL at each point of the snapshot where
// the store is changing that a git run marks: in the middle of git add
// (the index locked, half the new objects written), before write-tree,
// and a snapshot from what changed before it writes its objects. A git wrapper (internal/testkit/holdgit) holds the snapshot
// at the point until the test has killed the daemon, so the kill lands
// there on any machine. The daemon's git dies with it. Each time the
// store is whole (git fsck), no snapshot of the interrupted one is
// listed, and the restarted daemon comes up, lists only whole snapshots
// (show answers, each holds the whole tree of one round) and takes its
// start snapshot, which needs the store's locks the killed git left
// behind cleared. Then a burst of edits gives a new snapshot.
func TestSnapshotSIGKILLMidSnapshot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes a 200-file tree several times")
	}
	w, work := snapshotWorkspace(t, "")
	store := filepath.Join(w.state, "agents", "builder", "snapshots.git")
	stage := filepath.Join(w.dir, "stage")
	git := holdgit.New(t)
	env := []string{"PATH=" + git.Dir() + string(os.PathListSeparator) + os.Getenv("PATH")}
	writeKillTree(t, work, stage, 0)
	writeFile(t, work, "warm.txt", "before the start\n")
	p := startProc(t, w.socket, env, "run", "--config", w.config)
	ids := waitSnapshots(t, p, 1, 60*time.Second, "first start") // the start snapshot
	waitWatching(t, p, "first start")

	// A burst that changes .gitignore is snapshotted by a full git add; one
	// that only edits files and makes a new one, from what changed, in
	// process (its commit and ref: the store's own kill test holds those
	// points), after asking git check-ignore about the new file.
	points := []string{holdgit.MidAdd, holdgit.BeforeWriteTree, holdgit.BeforeCheckIgnore}
	for round, point := range points {
		r := round + 1
		when := fmt.Sprintf("round %d (kill before %s)", r, point)
		if point == holdgit.MidAdd {
			when = fmt.Sprintf("round %d (kill in the middle of git add)", r)
		}
		before := len(strings.Fields(storeGit(t, store, "for-each-ref", "--format=%(objectname)", "refs/snapshots/")))
		if point == holdgit.BeforeCheckIgnore {
			// The first snapshot after a start adds the whole tree (what
			// changed before the watcher began is not known): one burst
			// first, so that the held one is from what changed. It only
			// edits a file: a new one would start the store's long-lived
			// check-ignore (when the start snapshot came after the
			// watcher's, this burst is from what changed), and the held
			// burst would ask that one instead of starting its own.
			writeFile(t, work, "warm.txt", fmt.Sprintf("the burst before round %d\n", r))
			before++
			waitSnapshots(t, p, before, 60*time.Second, when+", the burst before")
		}
		git.Arm(t, point)
		if point == holdgit.BeforeCheckIgnore {
			writeFile(t, work, fmt.Sprintf("new-%d.txt", r), "a new file\n")
		} else {
			// First, so that the snapshot that holds is a full one.
			writeFile(t, work, ".gitignore", fmt.Sprintf("# round %d\n", r))
		}
		writeKillTree(t, work, stage, r)
		// The burst goes quiet, the policy asks for a snapshot, and its git
		// holds at the point.
		git.WaitHeld(t, 60*time.Second, func() string { return "log:\n" + p.stderr.String() })
		if point == holdgit.MidAdd {
			if _, err := os.Stat(filepath.Join(store, "index.lock")); err != nil {
				t.Fatalf("%s: git add holds without the store's index lock: %v", when, err)
			}
		}
		kids := childPIDs(p.cmd.Process.Pid)
		if len(kids) == 0 {
			t.Fatalf("%s: the daemon has no child while its git is held", when)
		}
		p.kill()
		killed := time.Now()
		// Held, git would never end on its own: only the parent-death
		// signal ends it, so a generous deadline cannot pass by chance.
		deadline := killed.Add(30 * time.Second)
		for _, k := range kids {
			for alive(k) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the daemon's child %d outlived it by 30 s (no parent-death signal?)", when, k)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		t.Logf("%s: children at the kill %v, gone after %s", when, kids, time.Since(killed))
		git.Release(t) // a filter git add left orphaned ends

		// Killed mid-way: no ref was made for the interrupted snapshot,
		// and what refs there are reach whole objects.
		refs := storeGit(t, store, "for-each-ref", "--format=%(objectname)", "refs/snapshots/")
		if n := len(strings.Fields(refs)); n != before {
			t.Fatalf("%s: the store has %d snapshot refs after the kill, %d before it", when, n, before)
		}
		storeGit(t, store, "fsck", "--connectivity-only", "--no-dangling")

		p = startProc(t, w.socket, env, "run", "--config", w.config)
		checkWholeSnapshots(t, p, store, listedSnapshots(t, p), when+", at restart")
		// The restarted daemon snapshots the tree as it is (round r): its
		// git needs the locks the killed one left gone.
		ids = waitSnapshots(t, p, before+1, 60*time.Second, when+", the start snapshot after the restart")
		waitWatching(t, p, when+", after the restart")
		checkWholeSnapshots(t, p, store, ids, when+", after the start snapshot")
		if got := storeGit(t, store, "cat-file", "blob", ids[0]+":"+killTreeFile(7)); got != strings.TrimSpace(killTreeText(r, 7)) {
			t.Fatalf("%s: the start snapshot after the restart is not of round %d", when, r)
		}
	}

	// The next burst gives a new snapshot with its record.
	agentDir := filepath.Join(w.state, "agents", "builder")
	edited := []string{killTreeFile(11), killTreeFile(123), killTreeFile(killTreeFiles - 1)}
	for _, f := range edited {
		writeFile(t, work, f, "edited after the kills: "+f+"\n")
	}
	rec := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && !slices.Contains(ids, wk.Snapshot.ID) &&
			workFile(wk, edited[0]) != nil && workFile(wk, edited[1]) != nil && workFile(wk, edited[2]) != nil
	})
	id := rec.Work.Snapshot.ID
	if got := listedSnapshots(t, p); len(got) == 0 || got[0] != id {
		t.Fatalf("the burst's snapshot %s is not the newest listed: %v", id, got)
	}
	if got := storeGit(t, store, "cat-file", "blob", id+":"+edited[1]); got != strings.TrimSpace("edited after the kills: "+edited[1]) {
		t.Fatalf("the burst's snapshot holds %q for %s", got, edited[1])
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, p.stderr)
	}
}
