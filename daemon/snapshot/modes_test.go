package snapshot

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func chmod(t *testing.T, dir, rel string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(rel)), m); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, dir, rel string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// Permissions git does not keep (0600, 0700, …) come back from a restore;
// a change of permissions alone makes a snapshot.
func TestRestoreKeepsModes(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "secret.env", "TOKEN=1\n")
	write(t, wd, "private/key", "key\n")
	write(t, wd, "run.sh", "#!/bin/sh\n")
	write(t, wd, "open.txt", "open\n")
	s := newStore(t, wd, Options{})
	mustTake(t, s, "start", 1)
	chmod(t, wd, "secret.env", 0o600)
	chmod(t, wd, "private/key", 0o640)
	chmod(t, wd, "private", 0o700)
	chmod(t, wd, "run.sh", 0o700)
	mustTake(t, s, "quiet", 1)
	chmod(t, wd, "open.txt", 0o640) // git sees no change
	v2, isNew := mustTake(t, s, "quiet", 1)
	if !isNew {
		t.Fatal("a change of permissions alone made no snapshot")
	}
	for _, p := range []string{"secret.env", "private/key", "run.sh", "open.txt"} {
		if err := os.Remove(filepath.Join(wd, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(wd, "private")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(context.Background(), v2.ID, nil, false); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"secret.env": 0o600, "private/key": 0o640, "private": 0o700, "run.sh": 0o700, "open.txt": 0o640} {
		if got := modeOf(t, wd, p); got != want {
			t.Errorf("%s restored %04o, want %04o", p, got, want)
		}
	}
}

// As root, what a restore creates is owned like the workdir, and a file it
// replaces keeps its owner.
func TestRestoreOwnsLikeTheWorkdir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	const uid, other = 40001, 40002
	wd := filepath.Join(t.TempDir(), "w")
	write(t, wd, "a.txt", "a\n")
	write(t, wd, "dir/b.txt", "b\n")
	write(t, wd, "theirs.txt", "1\n")
	write(t, wd, "swap/old.txt", "old\n")
	for _, p := range []string{"", "a.txt", "dir", "dir/b.txt", "swap", "swap/old.txt"} {
		if err := os.Lchown(filepath.Join(wd, p), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Lchown(filepath.Join(wd, "theirs.txt"), other, other); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, wd, Options{})
	v1, _ := mustTake(t, s, "start", 1)
	// swap/ holds only a file v1 lacks: the restore removes it, and swap/
	// with it, before git makes swap/ again for old.txt.
	if err := os.Rename(filepath.Join(wd, "swap/old.txt"), filepath.Join(wd, "swap/new.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(wd, "dir")); err != nil {
		t.Fatal(err)
	}
	write(t, wd, "theirs.txt", "2\n")
	if err := os.Remove(filepath.Join(wd, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(context.Background(), v1.ID, nil, false); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]uint32{"a.txt": uid, "dir": uid, "dir/b.txt": uid, "theirs.txt": other, "swap": uid, "swap/old.txt": uid} {
		fi, err := os.Lstat(filepath.Join(wd, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != want || st.Gid != want {
			t.Errorf("%s restored owned by %d:%d, want %d", p, st.Uid, st.Gid, want)
		}
	}
	if read(t, wd, "theirs.txt") != "1\n" {
		t.Fatal("theirs.txt not restored")
	}
}
