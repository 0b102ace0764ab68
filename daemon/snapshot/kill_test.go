package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/holdgit"
)

// childEnv makes the test binary a child that takes one snapshot of
// $SNAPSHOT_CHILD_WORK into $SNAPSHOT_CHILD_DIR and exits.
const childEnv = "SNAPSHOT_TEST_CHILD"

func runChild() int {
	s, err := Open(context.Background(), Options{
		Dir: os.Getenv("SNAPSHOT_CHILD_DIR"), Workdir: os.Getenv("SNAPSHOT_CHILD_WORK"),
		Git:    os.Getenv("SNAPSHOT_CHILD_GIT"),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, _, err := s.Take(context.Background(), "quiet", 2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A SIGKILL during a snapshot (the process and its git) leaves a store
// that opens, lists only whole snapshots, and takes the next snapshot
// correctly. A git wrapper holds the snapshot at each point where the
// store changes (git add with the index locked, before write-tree,
// commit-tree and update-ref) until the kill, on any machine.
func TestSIGKILLDuringSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree of 300 files")
	}
	wd := t.TempDir()
	write(t, wd, "first.txt", "the snapshot before\n")
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	s := newStore(t, wd, Options{Dir: dir})
	first, _ := take(t, s, "start", 1)
	s.Close()

	// 300 files of 8 KiB.
	for d := range 3 {
		for f := range 100 {
			write(t, wd, fmt.Sprintf("big/d%02d/f%03d.txt", d, f), randomText(8<<10, int64(d*100+f)))
		}
	}

	git := holdgit.New(t)
	for round, point := range []string{holdgit.MidAdd, holdgit.BeforeWriteTree, holdgit.BeforeCommitTree, holdgit.BeforeUpdateRef} {
		os.Remove(filepath.Join(dir, "index")) // make git hash every file again
		git.Arm(t, point)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "SNAPSHOT_CHILD_DIR="+dir, "SNAPSHOT_CHILD_WORK="+wd, "SNAPSHOT_CHILD_GIT="+git.Path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		git.WaitHeld(t, 60*time.Second, func() string { return "" })
		// The whole process group: the test process and its git.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d (%s): the child was not killed mid-way (%v)\n%s", round, point, err, stderr.String())
		}
		waitFor(t, func() bool { return syscall.Kill(-cmd.Process.Pid, 0) != nil }) // its git is gone too
		git.Release(t)

		s := newStore(t, wd, Options{Dir: dir})
		list, err := s.List(context.Background())
		if err != nil {
			t.Fatalf("round %d: List after SIGKILL: %v", round, err)
		}
		if len(list) != 1 || list[0].ID != first.ID {
			t.Fatalf("round %d: after SIGKILL mid-snapshot the store lists %+v, want only the snapshot before", round, list)
		}
		if out, err := s.git.run(context.Background(), call{args: []string{"fsck", "--connectivity-only", "--no-dangling"}}); err != nil {
			t.Fatalf("round %d: fsck after SIGKILL: %v\n%s", round, err, out)
		}
		s.Close()
	}

	s = newStore(t, wd, Options{Dir: dir})
	snap, isNew := take(t, s, "quiet", 3)
	if !isNew || snap.Added != 300 || snap.Parent != first.ID {
		t.Fatalf("the snapshot after the kills = %+v", snap)
	}
	got, err := s.git.run(context.Background(), call{args: []string{"cat-file", "blob", snap.ID + ":big/d02/f099.txt"}})
	if err != nil || string(got) != randomText(8<<10, 299) {
		t.Fatal("the snapshot after the kills holds wrong content")
	}
}

// waitFor polls cond until it holds, for up to 30 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
