package snapshot

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The line counts of a Take from what changed are git's: random edits of
// random texts, counted in process and by git diff --numstat.
func TestLineDiffCountsAreGits(t *testing.T) {
	dir := t.TempDir()
	userGit(t, dir, "init", "-q")
	rng := rand.New(rand.NewPCG(5, 9))
	text := func(n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = "l" + strconv.Itoa(rng.IntN(12)) + "\n"
		}
		return lines
	}
	for round := range 60 {
		a := text(rng.IntN(40))
		b := append([]string(nil), a...)
		for range rng.IntN(8) {
			switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0:
				b = append(b[:i], append(text(1+rng.IntN(3)), b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				if i < len(b) {
					b[i] = "changed " + strconv.Itoa(round) + "\n"
				}
			}
		}
		if rng.IntN(4) == 0 && len(b) > 0 {
			b[len(b)-1] = strings.TrimSuffix(b[len(b)-1], "\n") // no newline at the end
		}
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(pa, []byte(strings.Join(a, "")), 0o644)
		os.WriteFile(pb, []byte(strings.Join(b, "")), 0o644)
		want := gitNumstat(t, dir)
		added, deleted, err := lineDiff(splitLines([]byte(strings.Join(a, ""))), splitLines([]byte(strings.Join(b, ""))))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%d\t%d", added, deleted); got != want {
			t.Fatalf("round %d: counted %q, git says %q\na=%q\nb=%q", round, got, want, a, b)
		}
	}
	if _, _, err := lineDiff(text(3000), text(3000)); err != errTooManyEdits {
		t.Fatalf("two unrelated texts of 3,000 lines were counted in process (%v)", err)
	}
}

// gitNumstat is `git diff --no-index --numstat a b` in dir: "added\tdeleted".
func gitNumstat(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "diff", "--no-index", "--numstat", "a", "b")
	cmd.Dir, cmd.Env = dir, userGitEnv(t.TempDir())
	out, _ := cmd.Output() // exit 1: they differ
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return "0\t0"
	}
	return f[0] + "\t" + f[1]
}

// A Take from what changed writes its blobs, trees and commit as one
// pack, put in place before its ref, and no loose object; one that finds
// nothing new (or fails) leaves no pack or temporary file behind. A Take
// after it reads the trees it wrote back from the pack.
func TestTakeFromChangedWritesOnePack(t *testing.T) {
	wd := t.TempDir()
	for i := range 4 {
		write(t, wd, fmt.Sprintf("d%d/sub/f.txt", i), "one\n")
	}
	s := newStore(t, wd, Options{})
	s.Follow()
	take(t, s, "start", 1)
	objects := filepath.Join(s.Dir(), "objects")
	stored := func() (packs []string, loose []string) {
		t.Helper()
		packs, _ = filepath.Glob(filepath.Join(objects, "pack", "*"))
		loose, _ = filepath.Glob(filepath.Join(objects, "[0-9a-f][0-9a-f]", "*"))
		return packs, loose
	}
	packs0, loose0 := stored()

	write(t, wd, "d1/sub/f.txt", "two\n")
	write(t, wd, "d2/sub/new.txt", "new\n")
	s.NoteChanged([]string{"d1/sub/f.txt", "d2/sub/new.txt"})
	snap, isNew := take(t, s, "quiet", 2)
	if !isNew || !snap.Took.Incremental {
		t.Fatalf("Take from what changed: new %v, incremental %v", isNew, snap.Took.Incremental)
	}
	packs, loose := stored()
	if len(loose) != len(loose0) || len(packs) != len(packs0)+2 {
		t.Fatalf("the Take wrote packs %v -> %v and loose objects %d -> %d; want one pack and its index, no loose object",
			packs0, packs, len(loose0), len(loose))
	}
	if files := treeOf(t, s, snap.ID); files["d1/sub/f.txt"].content != "two\n" || files["d2/sub/new.txt"].content != "new\n" {
		t.Fatalf("the snapshot holds %v", files)
	}

	s.NoteChanged([]string{"d1/sub/f.txt"}) // nothing new in it
	if _, isNew := take(t, s, "quiet", 3); isNew {
		t.Fatal("a Take of an unchanged file made a snapshot")
	}
	if again, _ := stored(); len(again) != len(packs) {
		t.Fatalf("a Take that made no snapshot left files in objects/pack: %v -> %v", packs, again)
	}

	s.trees = treeCache{} // the next Take reads the trees from the pack
	write(t, wd, "d1/sub/f.txt", "three\n")
	s.NoteChanged([]string{"d1/sub/f.txt"})
	snap, _ = take(t, s, "quiet", 4)
	if files := treeOf(t, s, snap.ID); files["d1/sub/f.txt"].content != "three\n" || files["d2/sub/new.txt"].content != "new\n" {
		t.Fatalf("the snapshot after one read from the pack holds %v", files)
	}
}
