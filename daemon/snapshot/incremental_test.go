package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// editor makes random edits to a work tree, each of the kinds a snapshot
// from what changed must follow: files created, modified, deleted and
// renamed, modes changed, a directory replaced by a file and back, ignored
// files, editor temporary files, symbolic links, files growing over the
// size limit and back, a nested repository appearing and going, and the
// ignore rules themselves changing. Each edit returns the paths it
// touched, as a watcher reports them (a directory removed ends in "/").
type editor struct {
	t    testing.TB
	rng  *rand.Rand
	work string
	// ignoreEdits allows edits of .gitignore (a Take then adds the whole
	// tree, so a run that checks Takes stay incremental leaves them out).
	ignoreEdits bool
}

var (
	editDirs  = []string{"", "a", "a/b", "c", "n"}
	editNames = []string{"f1", "f2.txt", "g.go", "x.log", "f1~", ".f2.txt.swp", "tmp.tmp1"}
)

func (e *editor) abs(rel string) string { return filepath.Join(e.work, filepath.FromSlash(rel)) }

func (e *editor) randPath() string {
	dir := editDirs[e.rng.IntN(len(editDirs))]
	name := editNames[e.rng.IntN(len(editNames))]
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// files lists the regular files and links of the tree outside .git.
func (e *editor) files() []string {
	var list []string
	_ = filepath.WalkDir(e.work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(e.work, p)
			list = append(list, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(list)
	return list
}

// writeFile writes rel, making its directory; a file in the way of the
// directory is replaced by it.
func (e *editor) writeFile(rel string, size int) []string {
	touched := []string{rel}
	dir := filepath.Dir(e.abs(rel))
	for d := dir; d != e.work; d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
			e.must(os.Remove(d))
			r, _ := filepath.Rel(e.work, d)
			touched = append(touched, filepath.ToSlash(r))
		}
	}
	e.must(os.MkdirAll(dir, 0o755))
	if fi, err := os.Lstat(e.abs(rel)); err == nil && fi.IsDir() {
		e.must(os.RemoveAll(e.abs(rel)))
		touched = append(touched, rel+"/")
	} else if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		e.must(os.Remove(e.abs(rel))) // not written through
	}
	body := strings.Repeat(fmt.Sprintf("line %d\n", e.rng.IntN(1000)), 1+size/5)
	e.must(os.WriteFile(e.abs(rel), []byte(body[:size]), 0o644))
	return touched
}

func (e *editor) must(err error) {
	if err != nil {
		e.t.Fatal(err)
	}
}

// edit makes one random edit and returns the paths it touched.
func (e *editor) edit() []string {
	files := e.files()
	pick := func() string {
		if len(files) == 0 {
			return ""
		}
		return files[e.rng.IntN(len(files))]
	}
	switch op := e.rng.IntN(13); op {
	case 0, 1: // create or modify
		return e.writeFile(e.randPath(), 1+e.rng.IntN(60))
	case 2: // grow over the size limit (64 bytes in these tests)
		return e.writeFile(e.randPath(), 65+e.rng.IntN(40))
	case 3: // delete
		if p := pick(); p != "" {
			e.must(os.Remove(e.abs(p)))
			return []string{p}
		}
	case 4: // rename
		if p := pick(); p != "" {
			to := e.randPath()
			touched := e.writeFile(to, 1) // make its directory, clear the way
			if fi, err := os.Lstat(e.abs(p)); err != nil || fi.IsDir() {
				return touched // p was in the way of to's directory: gone
			}
			e.must(os.Rename(e.abs(p), e.abs(to)))
			return append(touched, p)
		}
	case 5: // mode change
		if p := pick(); p != "" {
			if fi, err := os.Lstat(e.abs(p)); err == nil && fi.Mode().IsRegular() {
				mode := []fs.FileMode{0o644, 0o755, 0o600, 0o700}[e.rng.IntN(4)]
				e.must(os.Chmod(e.abs(p), mode))
				return []string{p}
			}
		}
	case 6: // a directory replaced by a file, or a file by a directory
		d := []string{"a", "a/b", "c"}[e.rng.IntN(3)]
		fi, err := os.Lstat(e.abs(d))
		switch {
		case err == nil && fi.IsDir():
			e.must(os.RemoveAll(e.abs(d)))
			e.must(os.WriteFile(e.abs(d), []byte("now a file\n"), 0o644))
			return []string{d + "/", d}
		case err == nil:
			e.must(os.Remove(e.abs(d)))
			return append(e.writeFile(d+"/f1", 5), d)
		default:
			return e.writeFile(d+"/g.go", 7)
		}
	case 7: // ignored files and directories
		p := []string{"x.log", "a/y.log", "build/out.o", "a/build/deep/z.o"}[e.rng.IntN(4)]
		return e.writeFile(p, 1+e.rng.IntN(30))
	case 8: // a nested repository appears, or goes (its files join the tree)
		if _, err := os.Lstat(e.abs("n/.git")); err == nil {
			e.must(os.RemoveAll(e.abs("n/.git")))
			return []string{"n/"}
		}
		touched := e.writeFile("n/inner.txt", 9)
		e.must(os.MkdirAll(e.abs("n/.git/refs"), 0o755))
		e.must(os.WriteFile(e.abs("n/.git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
		return append(touched, "n/")
	case 9: // a symbolic link
		p := e.randPath()
		touched := e.writeFile(p, 1)
		e.must(os.Remove(e.abs(p)))
		e.must(os.Symlink([]string{"f1", "../c", "missing"}[e.rng.IntN(3)], e.abs(p)))
		return touched
	case 10: // the ignore rules change
		if e.ignoreEdits {
			rules := []string{"*.log\nbuild/\n", "*.log\n", "build/\n*.go\n", "*.log\nbuild/\n!a/y.log\n"}[e.rng.IntN(4)]
			e.must(os.WriteFile(e.abs(".gitignore"), []byte(rules), 0o644))
			return []string{".gitignore"}
		}
	case 11: // an unreadable directory name git never adds
		return e.writeFile("c/.GIT", 3)
	case 12: // a directory emptied and removed
		d := []string{"a/b", "c"}[e.rng.IntN(2)]
		if fi, err := os.Lstat(e.abs(d)); err == nil && fi.IsDir() {
			e.must(os.RemoveAll(e.abs(d)))
			return []string{d + "/"}
		}
	}
	return nil
}

// newEditor makes a work tree with some files and ignore rules.
func newEditor(t testing.TB, seed uint64) *editor {
	e := &editor{t: t, rng: rand.New(rand.NewPCG(seed, 1)), work: t.TempDir()}
	write(t, e.work, ".gitignore", "*.log\nbuild/\n")
	for _, p := range []string{"f1", "a/f1", "a/b/f2.txt", "c/g.go", "n/inner.txt"} {
		write(t, e.work, p, "first\n")
	}
	return e
}

// testSeeds are the seeds of the random edits: these, or the one in
// SNAPSHOT_TEST_SEED (to replay a failure or try others).
func testSeeds(seeds ...uint64) []uint64 {
	if v, err := strconv.ParseUint(os.Getenv("SNAPSHOT_TEST_SEED"), 10, 64); err == nil {
		return []uint64{v}
	}
	return seeds
}

// compareWithFull takes a snapshot with inc (from what changed) and with
// full (the whole tree added again) and fails when their trees differ.
func compareWithFull(t *testing.T, inc, full *Store, round int, log []string) Snapshot {
	t.Helper()
	a, _ := mustTake(t, inc, "quiet", uint64(round))
	b, _ := mustTake(t, full, "quiet", uint64(round))
	if b.Took.Incremental {
		t.Fatal("the reference store took a snapshot from what changed")
	}
	if cached := inc.recent.detail.Load(); cached != nil && cached.ID == a.ID {
		// Show's answer from the Take's own count equals the one read
		// back from the store.
		fast, err := inc.Show(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		inc.recent.detail.Store(nil)
		slow, err := inc.Show(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		jf, _ := json.Marshal(fast)
		js, _ := json.Marshal(slow)
		if string(jf) != string(js) {
			t.Fatalf("round %d: Show from the Take's count\n%s\n!= Show from the store\n%s", round, jf, js)
		}
		inc.recent.detail.Store(cached)
	}
	if kept := inc.recent.changes.Load(); kept != nil && a.Parent != "" {
		// Between from the Take's own changes equals git's diff.
		fast, err := inc.Between(context.Background(), a.Parent, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		inc.recent.changes.Store(nil)
		slow, err := inc.Between(context.Background(), a.Parent, a.ID)
		inc.recent.changes.Store(kept)
		if err != nil {
			t.Fatal(err)
		}
		if jf, js := fmt.Sprint(fast), fmt.Sprint(slow); jf != js {
			t.Fatalf("round %d: Between from the Take's changes\n%s\n!= from git\n%s", round, jf, js)
		}
	}
	if ta, tb := treeID(t, inc, a.ID), treeID(t, full, b.ID); ta != tb || newestModes(t, inc) != newestModes(t, full) || a.Skipped != b.Skipped {
		ta, tb := treeOf(t, inc, a.ID), treeOf(t, full, b.ID)
		var diff []string
		da, _ := inc.Show(context.Background(), a.ID)
		db, _ := full.Show(context.Background(), b.ID)
		diff = append(diff, fmt.Sprintf("skipped: incremental %+v, full %+v", da.SkippedFiles, db.SkippedFiles))
		diff = append(diff, treeDiff(ta, tb, "incremental", "full")...)
		t.Fatalf("round %d: incremental tree %s (skipped %d, modes %q) != full tree %s (skipped %d, modes %q)\n%s\nedits:\n%s",
			round, ta, a.Skipped, newestModes(t, inc), tb, b.Skipped, newestModes(t, full),
			strings.Join(diff, "\n"), strings.Join(log, "\n"))
	}
	return a
}

// TestIncrementalEqualsFullAdd: after random edit sequences, a snapshot
// from the changed paths has the tree of a full `git add -A` of the same
// tree (a second store, which is never told what changed), round after
// round; told that changes may have been missed (an overflow), the store
// adds the whole tree and is equal again.
func TestIncrementalEqualsFullAdd(t *testing.T) {
	for _, seed := range testSeeds(1, 2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			e := newEditor(t, seed)
			e.ignoreEdits = true
			opt := Options{MaxFileBytes: 64}
			inc, full := newStore(t, e.work, opt), newStore(t, e.work, opt)
			inc.Follow()
			compareWithFull(t, inc, full, 0, nil)
			incremental := 0
			var log []string
			for round := 1; round <= 30; round++ {
				var touched []string
				for range 1 + e.rng.IntN(5) {
					p := e.edit()
					log = append(log, fmt.Sprintf("round %d: %v", round, p))
					touched = append(touched, p...)
				}
				if e.rng.IntN(10) == 0 {
					inc.NoteUnknown() // an overflow: the watcher cannot vouch
				} else {
					inc.NoteChanged(touched)
				}
				if compareWithFull(t, inc, full, round, log).Took.Incremental {
					incremental++
				}
			}
			if incremental < 15 {
				t.Fatalf("only %d of 30 rounds were snapshots from what changed: the test compares too little", incremental)
			}
		})
	}
}

// TestIncrementalFromTheWatcher: the same, with the paths reported by the
// real workdir watcher (fsnotify) as the capture feeds them: nothing the
// watcher leaves out of a summary may be missing from a snapshot.
func TestIncrementalFromTheWatcher(t *testing.T) {
	e := newEditor(t, testSeeds(7)[0])
	opt := Options{MaxFileBytes: 64}
	inc, full := newStore(t, e.work, opt), newStore(t, e.work, opt)

	w, err := watch.New(watch.Options{Root: e.work, Quiet: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // markers seen in a summary
	incomplete := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(s watch.Summary) {
			if s.Complete {
				inc.NoteChanged(s.Changed)
			} else {
				inc.NoteUnknown()
			}
			mu.Lock()
			defer mu.Unlock()
			if !s.Complete {
				incomplete++
			}
			for _, p := range s.Paths {
				seen[p] = true
			}
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()
	<-w.Ready()
	inc.Follow()
	compareWithFull(t, inc, full, 0, nil)

	incremental := 0
	var log []string
	for round := 1; round <= 30; round++ {
		for range 1 + e.rng.IntN(5) {
			log = append(log, fmt.Sprintf("round %d: %v", round, e.edit()))
		}
		// A marker written last: once a summary names it, every earlier
		// event has been read (the kernel keeps their order).
		marker := fmt.Sprintf("marker%d", round)
		write(t, e.work, marker, "m\n")
		testwait.Until(t, func() string { return fmt.Sprintf("round %d: the watcher did not report %s", round, marker) }, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[marker]
		})
		if compareWithFull(t, inc, full, round, log).Took.Incremental {
			incremental++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if incremental < 15 {
		t.Fatalf("only %d of 30 rounds were snapshots from what changed (%d summaries incomplete): the test compares too little", incremental, incomplete)
	}
}

// TestIncrementalAfterPacking: once the collector has packed the store,
// a snapshot from what changed reads the trees and the old files it needs
// from the pack (the long-lived cat-file), and still equals a full add,
// with the same line counts as git's.
func TestIncrementalAfterPacking(t *testing.T) {
	e := newEditor(t, testSeeds(11)[0])
	opt := Options{MaxFileBytes: 64}
	inc, full := newStore(t, e.work, opt), newStore(t, e.work, opt)
	inc.Follow()
	compareWithFull(t, inc, full, 0, nil)
	incremental := 0
	var log []string
	for round := 1; round <= 12; round++ {
		if _, err := inc.GC(context.Background()); err != nil {
			t.Fatal(err)
		}
		if newest, ok := inc.Newest(); ok {
			if _, err := os.Stat(inc.repo.ObjectPath(mustOID(t, treeID(t, inc, newest.ID)))); err == nil {
				t.Fatalf("round %d: the newest tree is loose after GC: the test reads nothing from a pack", round)
			}
		}
		var touched []string
		for range 1 + e.rng.IntN(4) {
			p := e.edit()
			log = append(log, fmt.Sprintf("round %d: %v", round, p))
			touched = append(touched, p...)
		}
		inc.NoteChanged(touched)
		if compareWithFull(t, inc, full, round, log).Took.Incremental {
			incremental++
		}
	}
	if incremental < 6 {
		t.Fatalf("only %d of 12 rounds were snapshots from what changed", incremental)
	}
	inc.lock.Lock()
	defer inc.lock.Unlock()
	if inc.take.PackedReads() == 0 {
		t.Fatal("no object was read from a pack")
	}
}
