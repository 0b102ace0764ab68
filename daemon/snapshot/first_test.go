//go:build linux

package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
)

// firstTree writes the cases a first snapshot must decide as git add -A
// does, beside the editor's: links (to a file, to a directory, dangling,
// out of the tree), execute bits, identical files (one object), an empty
// file, a file "a.b" beside a directory "a" (tree order), a directory of
// ignored files only, an ignored directory with a negated file in it, a
// nested ignore file, a file over the size limit and an ignored one,
// names git takes for .git (a file, a directory), a named pipe, a nested
// repository, the ignored directory names and patterns of the options,
// names with spaces, a newline, a tab, a backslash, a leading dash,
// non-ASCII and bytes that are not UTF-8.
func firstTree(t *testing.T, work string) {
	t.Helper()
	for p, c := range map[string]string{
		"x/a.b": "dot\n", "x/a/inner": "in\n", "x/a/inner2": "in\n", "x/empty": "",
		"same1": "same\n", "same2": "same\n", "deep/1/2/3/4/leaf": "leaf\n",
		"onlyignored/q.log": "q\n", "ign/keep.txt": "k\n",
		"sub/.gitignore": "*.txt\n!keep.txt\n", "sub/a.txt": "ignored by sub\n", "sub/keep.txt": "kept\n",
		"big.bin": strings.Repeat("b", 100), "bigignored.log": strings.Repeat("b", 100),
		"node_modules/m/index.js": "module\n", "x/node_modules/y.js": "module\n", "notes.secret": "s\n",
		"with space/f i l e": "space\n", "new\nline": "newline\n", "ünï/cödé.txt": "utf8\n",
		"nested/inner.txt": "nested\n", "run.sh": "#!/bin/sh\n", "x/.Git": "odd\n", "deep/.GIT/f": "odd\n",
		"bad\xff\xfe.txt": "not UTF-8\n", "back\\slash/-dash": "odd names\n", "tab\there": "tab\n",
	} {
		write(t, work, p, c)
	}
	if err := os.WriteFile(filepath.Join(work, ".gitignore"), []byte("*.log\nign/\n!ign/keep.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(work, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"l-file": "same1", "l-dir": "x", "l-dangling": "nowhere", "l-out": "/etc/hostname"} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(work, "x", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	userGit(t, filepath.Join(work, "nested"), "init", "-q")
}

// TestFirstEqualsGitAdd: a first snapshot written in process (package take)
// is the one git add -A stages, on trees of random edits (in one pack,
// or in several for odd seeds): the same tree,
// skipped files and permissions, and a private index with the same
// entries and stat data as git's own, so the full add after it reads
// nothing again; and the full adds after it stay equal.
func TestFirstEqualsGitAdd(t *testing.T) {
	for _, seed := range testSeeds(1, 2, 3, 4, 5, 6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			e := newEditor(t, seed)
			e.ignoreEdits = true
			firstTree(t, e.work)
			for range 10 + e.rng.IntN(30) {
				e.edit()
			}
			opt := Options{MaxFileBytes: 64, IgnoreDirs: []string{"node_modules"}, Ignore: []string{"*.secret"}}
			ours, git := newStore(t, e.work, opt), newStore(t, e.work, opt)
			git.take.Hooks.FirstByGit = true
			if seed%2 == 1 {
				ours.take.Hooks.FirstPackObjects = 7 // several packs, one after another
			}
			a, _ := mustTake(t, ours, "start", 1)
			b, _ := mustTake(t, git, "start", 1)
			if n := looseObjects(t, ours); n != 1 {
				t.Fatalf("the first snapshot left %d loose objects, want its commit only: it was not written in process", n)
			}
			if packs, _ := filepath.Glob(filepath.Join(ours.opt.Dir, "objects", "pack", "pack-*.pack")); seed%2 == 1 && len(packs) < 2 {
				t.Fatalf("the first snapshot of %d files wrote %d packs of at most 7 objects", a.Added, len(packs))
			}
			sameSnapshot(t, "first", ours, git, a, b)
			if x, y := indexDebug(t, ours), indexDebug(t, git); x != y {
				t.Fatalf("the private index written in process differs from git's:\n%s\n---- git's:\n%s", x, y)
			}
			if out, err := ours.git.Run(context.Background(), repo.Call{Args: []string{"fsck", "--strict", "--no-dangling"}}); err != nil {
				t.Fatalf("fsck: %v\n%s", err, out)
			}
			// The full adds after it (nothing told what changed).
			for round := 2; round <= 6; round++ {
				for range 1 + e.rng.IntN(4) {
					e.edit()
				}
				a, _ = mustTake(t, ours, "quiet", uint64(round))
				b, _ = mustTake(t, git, "quiet", uint64(round))
				sameSnapshot(t, fmt.Sprint("round ", round), ours, git, a, b)
			}
		})
	}
}

// sameSnapshot fails unless a (of ours) and b (of git) hold the same tree,
// counts, skipped files and permissions.
func sameSnapshot(t *testing.T, what string, ours, git *Store, a, b Snapshot) {
	t.Helper()
	da, err := ours.Show(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	db, err := git.Show(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(da.SkippedFiles)
	jb, _ := json.Marshal(db.SkippedFiles)
	if ta, tb := treeID(t, ours, a.ID), treeID(t, git, b.ID); ta != tb || a.Added != b.Added || newestModes(t, ours) != newestModes(t, git) || string(ja) != string(jb) {
		diff := treeDiff(treeOf(t, ours, a.ID), treeOf(t, git, b.ID), "ours", "git's")
		t.Fatalf("%s: ours %s (added %d, modes %q, skipped %s) != git's %s (added %d, modes %q, skipped %s)\n%s",
			what, ta, a.Added, newestModes(t, ours), ja, tb, b.Added, newestModes(t, git), jb, strings.Join(diff, "\n"))
	}
}

// indexDebug is the store's private index as `git ls-files --stage
// --debug` shows it: every entry with its stat data.
func indexDebug(t *testing.T, s *Store) string {
	t.Helper()
	out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"ls-files", "--stage", "--debug"}})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// looseObjects counts the store's loose objects.
func looseObjects(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	dirs, _ := filepath.Glob(filepath.Join(s.opt.Dir, "objects", "[0-9a-f][0-9a-f]"))
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		n += len(ents)
	}
	return n
}

// TestFirstFallsBackToGitAdd: what a first snapshot does not read in
// process (here a file larger than it holds, with no size limit set)
// leaves the Take to git add, which stages the same tree; nothing of the
// abandoned attempt is left (its temporary pack, the index lock).
func TestFirstFallsBackToGitAdd(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "a\n")
	write(t, wd, "sub/b.txt", "b\n")
	big := filepath.Join(wd, "sub", "big.bin")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, repo.MaxObjectBytes+1); err != nil { // sparse: no disk written
		t.Fatal(err)
	}
	var log logSink
	s := newStore(t, wd, Options{MaxFileBytes: -1, Logger: log.logger()})
	snap, _ := mustTake(t, s, "start", 1)
	if !strings.Contains(log.String(), "staged by git add instead") || !strings.Contains(log.String(), "sub/big.bin") {
		t.Fatalf("the first snapshot did not fall back to git add, naming the file; log:\n%s", log.String())
	}
	out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"ls-tree", "-r", "-l", "--full-tree", snap.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(" %d\tsub/big.bin\n", repo.MaxObjectBytes+1); strings.Count(string(out), "\n") != 3 || !strings.Contains(string(out), want) {
		t.Fatalf("the snapshot holds\n%s", out)
	}
	left, _ := filepath.Glob(filepath.Join(s.opt.Dir, "objects", "pack", "tmp_*"))
	if _, err := os.Stat(s.git.Index() + ".lock"); err == nil || len(left) > 0 {
		t.Fatalf("the abandoned attempt left %v and index.lock (%v)", left, err)
	}
}

// TestFirstReadsLargeFilesAlone: files over take.FirstAheadBytes are read by
// the writer itself, between the ones read ahead, and the snapshot and
// the index are still git add's.
func TestFirstReadsLargeFilesAlone(t *testing.T) {
	wd := t.TempDir()
	for i, size := range []int{10, take.FirstAheadBytes + 1, 1 << 20, 7, 3 * take.FirstAheadBytes} {
		write(t, wd, fmt.Sprintf("d/f%d", i), randomText(size, int64(i)))
	}
	ours, git := newStore(t, wd, Options{}), newStore(t, wd, Options{})
	git.take.Hooks.FirstByGit = true
	var held []string
	ours.take.Hooks.Point = func(p string) { held = append(held, p) }
	a, _ := mustTake(t, ours, "start", 1)
	b, _ := mustTake(t, git, "start", 1)
	if !slices.Contains(held, take.PointFirstObjects) {
		t.Fatalf("the first snapshot was not written in process (points %v)", held)
	}
	sameSnapshot(t, "first", ours, git, a, b)
	if x, y := indexDebug(t, ours), indexDebug(t, git); x != y {
		t.Fatalf("the private index written in process differs from git's:\n%s\n---- git's:\n%s", x, y)
	}
}
