package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// The objects a Take writes in process are git's own: the same ids as
// git hash-object, git mktree and git commit-tree give for the same
// content, readable by git, and read back only when they check.
func TestLooseObjectsAreGits(t *testing.T) {
	s := newStore(t, t.TempDir(), Options{})
	ctx := context.Background()
	gitOut := func(stdin string, args ...string) string {
		t.Helper()
		c := repo.Call{Args: args, Env: []string{"GIT_AUTHOR_DATE=@1764496800 +0000", "GIT_COMMITTER_DATE=@1764496800 +0000"}}
		if stdin != "" {
			c.Stdin = strings.NewReader(stdin)
		}
		out, err := s.git.Run(ctx, c)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}

	blob := "line one\nline two, no newline at the end"
	id, err := s.writeLoose("blob", []byte(blob))
	if err != nil {
		t.Fatal(err)
	}
	if want := gitOut(blob, "hash-object", "--stdin"); id.String() != want {
		t.Fatalf("blob id %s, git says %s", id, want)
	}
	if got := gitOut("", "cat-file", "blob", id.String()); got != strings.TrimSpace(blob) {
		t.Fatalf("git reads the blob as %q", got)
	}
	link, _ := s.writeLoose("blob", []byte("../target"))

	// Names whose order differs between a file and a directory of the
	// same name ("a" sorts as "a/" when it is a tree).
	sub, err := s.writeLoose("tree", encodeTree([]treeEntry{{name: "x", mode: modeFile, id: id}}))
	if err != nil {
		t.Fatal(err)
	}
	entries := []treeEntry{
		{name: "a.b", mode: modeFile, id: id}, {name: "a", mode: modeTree, id: sub},
		{name: "a-b", mode: modeExec, id: id}, {name: "a0", mode: modeLink, id: link},
		{name: "ü ñ", mode: modeFile, id: id}, {name: "A", mode: modeFile, id: id},
	}
	tree, err := s.writeLoose("tree", encodeTree(entries))
	if err != nil {
		t.Fatal(err)
	}
	var mk strings.Builder
	for _, e := range entries {
		typ := "blob"
		if e.isTree() {
			typ = "tree"
		}
		fmt.Fprintf(&mk, "%06o %s %s\t%s\n", e.mode, typ, e.id, e.name)
	}
	if want := gitOut(mk.String(), "mktree"); tree.String() != want {
		t.Fatalf("tree id %s, git mktree says %s", tree, want)
	}
	_, data, ok, err := s.readLoose(tree)
	if !ok || err != nil {
		t.Fatalf("readLoose: %v %v", ok, err)
	}
	back, err := parseTree(data)
	if err != nil || len(back) != len(entries) {
		t.Fatalf("parseTree: %v %+v", err, back)
	}

	msg := "continuityd-snapshot v=1 n=1 trigger=quiet seq=1\n\nskipped reason=too_large size=9 path=\"a\\x00b\"\n"
	commit, err := s.writeLoose("commit", commitObject(tree.String(), 1764496800, msg))
	if err != nil {
		t.Fatal(err)
	}
	if want := gitOut(msg, "commit-tree", tree.String()); commit.String() != want {
		t.Fatalf("commit id %s, git commit-tree says %s", commit, want)
	}
	if err := s.createRef(refName(1), commit); err != nil {
		t.Fatal(err)
	}
	if got := gitOut("", "rev-parse", refName(1)); got != commit.String() {
		t.Fatalf("the ref reads %s", got)
	}
	if err := s.createRef(refName(1), commit); err == nil {
		t.Fatal("createRef replaced a ref that exists")
	}
	gitOut("", "fsck", "--strict", "--no-dangling")

	// A damaged loose object is refused, naming it.
	p := s.objectPath(id)
	os.Chmod(p, 0o644)
	raw, _ := os.ReadFile(p)
	raw[len(raw)-3] ^= 0xff
	if err := os.WriteFile(p, raw, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.readLoose(id); err == nil || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("a damaged object read as %v", err)
	}
	if _, _, ok, err := s.readLoose(hashObject("blob", []byte("never written"))); ok || err != nil {
		t.Fatalf("a missing object: ok %v, err %v", ok, err)
	}
}

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

// A pack stores trees uncompressed (their object ids do not compress, and
// deflating a tree costs forty times as much) and deflates blobs; git
// reads both back as they were written.
func TestPackStoresTreesDeflatesBlobs(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	w, err := newPackWriter(dir, 2, 4<<10, packCompressors{})
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte(strings.Repeat("func f(x int) int { return x + 1 }\n", 40))
	blobID, err := w.add("blob", blob)
	if err != nil {
		t.Fatal(err)
	}
	var entries []treeEntry
	for i := range 50 {
		entries = append(entries, treeEntry{name: fmt.Sprintf("file%03d.go", i), mode: 0o100644, id: hashObject("blob", []byte{byte(i)})})
	}
	tree := encodeTree(entries)
	treeID, err := w.add("tree", tree)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[oid]int64{}
	for _, o := range w.objs {
		offsets[o.id] = o.off
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs in place: %v, want one", packs)
	}
	raw, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	// blockType is the type of the first deflate block of the object at
	// off: past its type-and-size bytes, then zlib's two header bytes.
	blockType := func(off int64) byte {
		i := off
		for raw[i]&0x80 != 0 {
			i++
		}
		return raw[i+3] >> 1 & 3
	}
	if bt := blockType(offsets[treeID]); bt != 0 {
		t.Errorf("the tree's first deflate block has type %d, want 0 (stored)", bt)
	}
	if bt := blockType(offsets[blobID]); bt == 0 {
		t.Error("the blob is stored, want it deflated")
	}
	for _, o := range []struct {
		id   oid
		typ  string
		data []byte
	}{{treeID, "tree", tree}, {blobID, "blob", blob}} {
		got, err := exec.Command("git", "--git-dir", dir, "cat-file", o.typ, o.id.String()).Output()
		if err != nil || string(got) != string(o.data) {
			t.Fatalf("git cat-file %s %s: %v (%d bytes, want %d)", o.typ, o.id, err, len(got), len(o.data))
		}
	}
}
