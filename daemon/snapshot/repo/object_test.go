package repo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newRepo makes a store for a fresh work tree.
func newRepo(t *testing.T) *Repo {
	t.Helper()
	ctx := context.Background()
	tool, err := CheckGit(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	exclude, _ := BaseExclude(work, dir, nil, nil, nil)
	r, err := Open(ctx, dir, work, tool, slog.New(slog.DiscardHandler), exclude)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The objects a Take writes in process are git's own: the same ids as
// git hash-object, git mktree and git commit-tree give for the same
// content, readable by git, and read back only when they check.
func TestLooseObjectsAreGits(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	var zw Compressors
	gitOut := func(stdin string, args ...string) string {
		t.Helper()
		c := Call{Args: args, Env: []string{"GIT_AUTHOR_DATE=@1764496800 +0000", "GIT_COMMITTER_DATE=@1764496800 +0000"}}
		if stdin != "" {
			c.Stdin = strings.NewReader(stdin)
		}
		out, err := r.git.Run(ctx, c)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}

	blob := "line one\nline two, no newline at the end"
	id, err := r.WriteLoose("blob", []byte(blob), &zw)
	if err != nil {
		t.Fatal(err)
	}
	if want := gitOut(blob, "hash-object", "--stdin"); id.String() != want {
		t.Fatalf("blob id %s, git says %s", id, want)
	}
	if got := gitOut("", "cat-file", "blob", id.String()); got != strings.TrimSpace(blob) {
		t.Fatalf("git reads the blob as %q", got)
	}
	link, _ := r.WriteLoose("blob", []byte("../target"), &zw)

	// Names whose order differs between a file and a directory of the
	// same name ("a" sorts as "a/" when it is a tree).
	sub, err := r.WriteLoose("tree", EncodeTree([]TreeEntry{{Name: "x", Mode: ModeFile, ID: id}}), &zw)
	if err != nil {
		t.Fatal(err)
	}
	entries := []TreeEntry{
		{Name: "a.b", Mode: ModeFile, ID: id}, {Name: "a", Mode: ModeTree, ID: sub},
		{Name: "a-b", Mode: ModeExec, ID: id}, {Name: "a0", Mode: ModeLink, ID: link},
		{Name: "ü ñ", Mode: ModeFile, ID: id}, {Name: "A", Mode: ModeFile, ID: id},
	}
	tree, err := r.WriteLoose("tree", EncodeTree(entries), &zw)
	if err != nil {
		t.Fatal(err)
	}
	var mk strings.Builder
	for _, e := range entries {
		typ := "blob"
		if e.IsTree() {
			typ = "tree"
		}
		fmt.Fprintf(&mk, "%06o %s %s\t%s\n", e.Mode, typ, e.ID, e.Name)
	}
	if want := gitOut(mk.String(), "mktree"); tree.String() != want {
		t.Fatalf("tree id %s, git mktree says %s", tree, want)
	}
	_, data, ok, err := r.ReadLoose(tree)
	if !ok || err != nil {
		t.Fatalf("readLoose: %v %v", ok, err)
	}
	back, err := ParseTree(data)
	if err != nil || len(back) != len(entries) {
		t.Fatalf("parseTree: %v %+v", err, back)
	}

	msg := "continuityd-snapshot v=1 n=1 trigger=quiet seq=1\n\nskipped reason=too_large size=9 path=\"a\\x00b\"\n"
	commit, err := r.WriteLoose("commit", CommitObject(tree.String(), 1764496800, msg), &zw)
	if err != nil {
		t.Fatal(err)
	}
	if want := gitOut(msg, "commit-tree", tree.String()); commit.String() != want {
		t.Fatalf("commit id %s, git commit-tree says %s", commit, want)
	}
	if err := r.CreateRef(RefName(1), commit, func() {}); err != nil {
		t.Fatal(err)
	}
	if got := gitOut("", "rev-parse", RefName(1)); got != commit.String() {
		t.Fatalf("the ref reads %s", got)
	}
	if err := r.CreateRef(RefName(1), commit, func() {}); err == nil {
		t.Fatal("createRef replaced a ref that exists")
	}
	gitOut("", "fsck", "--strict", "--no-dangling")

	// A damaged loose object is refused, naming it.
	p := r.ObjectPath(id)
	os.Chmod(p, 0o644)
	raw, _ := os.ReadFile(p)
	raw[len(raw)-3] ^= 0xff
	if err := os.WriteFile(p, raw, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := r.ReadLoose(id); err == nil || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("a damaged object read as %v", err)
	}
	if _, _, ok, err := r.ReadLoose(HashObject("blob", []byte("never written"))); ok || err != nil {
		t.Fatalf("a missing object: ok %v, err %v", ok, err)
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
	w, err := NewPackWriter(dir, 2, 4<<10, Compressors{})
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte(strings.Repeat("func f(x int) int { return x + 1 }\n", 40))
	blobID, err := w.Add("blob", blob)
	if err != nil {
		t.Fatal(err)
	}
	var entries []TreeEntry
	for i := range 50 {
		entries = append(entries, TreeEntry{Name: fmt.Sprintf("file%03d.go", i), Mode: 0o100644, ID: HashObject("blob", []byte{byte(i)})})
	}
	tree := EncodeTree(entries)
	treeID, err := w.Add("tree", tree)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[OID]int64{}
	for _, o := range w.objs {
		offsets[o.id] = o.off
	}
	if err := w.Finish(); err != nil {
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
		id   OID
		typ  string
		data []byte
	}{{treeID, "tree", tree}, {blobID, "blob", blob}} {
		got, err := exec.Command("git", "--git-dir", dir, "cat-file", o.typ, o.id.String()).Output()
		if err != nil || string(got) != string(o.data) {
			t.Fatalf("git cat-file %s %s: %v (%d bytes, want %d)", o.typ, o.id, err, len(got), len(o.data))
		}
	}
}
