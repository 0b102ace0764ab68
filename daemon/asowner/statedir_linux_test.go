package asowner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStoreDir prepares the owners' part of the state directory (root
// only: it gives directories away): the modes and owners the model
// needs, a store root kept moved to the owner once with every entry given
// away and no link followed, a move cut short finished, a store the owner
// has already left alone, and a link planted where the owner's directory
// goes refused.
func TestStoreDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving directories to another user needs root")
	}
	top := t.TempDir()
	state := filepath.Join(top, "state")
	owner := Owner{UID: testOwnerID, GID: testOwnerID}
	uidDir := filepath.Join(state, OwnersDir, strconv.Itoa(testOwnerID))
	mkAgent := func(name string) string {
		d := filepath.Join(state, "agents", name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	uidOf := func(p string) uint32 {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}

	// A store root kept, with a link to a root-only file planted in it.
	a := mkAgent("a")
	old := filepath.Join(a, "snapshots.git")
	writeTree(t, old, "HEAD", "objects/pack/p.pack", "refs/snapshots/000000000001")
	rootOnly := filepath.Join(top, "root-only")
	writeFile(t, rootOnly, "root's\n")
	if err := os.Symlink(rootOnly, filepath.Join(old, "objects", "planted")); err != nil {
		t.Fatal(err)
	}
	log, lines := newLog()
	opts := StoreOptions{StateDir: state, AgentDir: a, Agent: "a", Workdir: "/work/a", Old: old, Owner: owner, Logger: log}
	dir, err := StoreDir(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, uidDir+"/a-") || filepath.Base(dir) != "snapshots.git" {
		t.Fatalf("the store: %s", dir)
	}
	for path, want := range map[string]os.FileMode{filepath.Join(state, OwnersDir): 0o711, uidDir: 0o700} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != want || !fi.IsDir() {
			t.Errorf("%s: %v %v, want a directory of mode %o", path, fi.Mode(), err, want)
		}
	}
	if fi, _ := os.Lstat(state); fi.Mode().Perm()&0o001 == 0 {
		t.Errorf("the state directory is not searchable by the owner's worker: %v", fi.Mode())
	}
	if uidOf(filepath.Join(state, OwnersDir)) != 0 || uidOf(uidDir) != testOwnerID {
		t.Error("the owners' directory is not root's, or the owner's is not the owner's")
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("the old store is still there: %v", err)
	}
	err = filepath.Walk(filepath.Dir(dir), func(p string, _ os.FileInfo, err error) error {
		if err == nil && uidOf(p) != testOwnerID {
			t.Errorf("%s was not given to the owner", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if uidOf(rootOnly) != 0 {
		t.Error("the file a planted link names was given away")
	}
	if !strings.Contains(lines.String(), "moved the agent's snapshot store") {
		t.Errorf("the move is not logged: %s", lines)
	}
	if again, err := StoreDir(opts); err != nil || again != dir {
		t.Errorf("a second start: %s %v, want %s", again, err, dir)
	}

	// A move cut short after the store was put aside: finished.
	b := mkAgent("b")
	writeTree(t, filepath.Join(b, movingName, "snapshots.git"), "HEAD")
	dirB, err := StoreDir(StoreOptions{StateDir: state, AgentDir: b, Agent: "b", Workdir: "/work/b", Old: filepath.Join(b, "snapshots.git"), Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if uidOf(filepath.Join(dirB, "HEAD")) != testOwnerID {
		t.Error("the store put aside before a crash was not moved to the owner")
	}

	// The owner has a store already: the old one is kept aside.
	c := mkAgent("c")
	if err := os.WriteFile(filepath.Join(c, StorePointer), []byte("c-mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTree(t, filepath.Join(uidDir, "c-mine", "snapshots.git"), "HEAD")
	writeTree(t, filepath.Join(c, "snapshots.git"), "HEAD")
	log, lines = newLog()
	dirC, err := StoreDir(StoreOptions{StateDir: state, AgentDir: c, Agent: "c", Workdir: "/work/c", Old: filepath.Join(c, "snapshots.git"), Owner: owner, Logger: log})
	if err != nil || dirC != filepath.Join(uidDir, "c-mine", "snapshots.git") {
		t.Fatalf("with a store of the owner's: %s %v", dirC, err)
	}
	if _, err := os.Stat(filepath.Join(c, movingName, "snapshots.git", "HEAD")); err != nil || !strings.Contains(lines.String(), "kept aside") {
		t.Errorf("the old store is not kept aside and said so: %v %s", err, lines)
	}

	// A link where another owner's directory goes is refused, not followed.
	elsewhere := filepath.Join(top, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(state, OwnersDir, "40002")); err != nil {
		t.Fatal(err)
	}
	d := mkAgent("d")
	if _, err := StoreDir(StoreOptions{StateDir: state, AgentDir: d, Agent: "d", Workdir: "/work/d", Owner: Owner{UID: 40002, GID: 40002}}); err == nil {
		t.Error("a link in place of the owner's directory was followed")
	}
	if uidOf(elsewhere) != 0 {
		t.Error("the directory a planted link names was given away")
	}
}

// writeTree makes files (and their directories) under dir.
func writeTree(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, f+"\n")
	}
}
