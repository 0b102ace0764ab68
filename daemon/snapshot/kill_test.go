package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
	"github.com/continuityd/continuityd/internal/testkit/holdgit"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// childEnv makes the test binary a child that takes one snapshot of
// $SNAPSHOT_CHILD_WORK into $SNAPSHOT_CHILD_DIR and exits. With
// $SNAPSHOT_CHILD_HOLD it stops for good at that in-process point
// (holdPoints), after writing $SNAPSHOT_CHILD_HELD. With
// $SNAPSHOT_CHILD_FAST it first takes a full snapshot, then edits
// fast.txt and takes one from what changed (the one held).
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
	if os.Getenv("SNAPSHOT_CHILD_FAST") != "" {
		s.Follow()
		if _, _, err := s.Take(context.Background(), "start", 2); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.WriteFile(filepath.Join(s.work, "fast.txt"), []byte(os.Getenv("SNAPSHOT_CHILD_FAST")), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s.NoteChanged([]string{"fast.txt"})
	}
	if hold := os.Getenv("SNAPSHOT_CHILD_HOLD"); hold != "" {
		s.take.Hooks.Point = func(p string) {
			if p == hold {
				os.WriteFile(os.Getenv("SNAPSHOT_CHILD_HELD"), []byte(p), 0o600)
				// Held until the test kills the process: its stdin is a
				// pipe the test never writes to. Should the test go away
				// instead, the pipe ends and so does the child.
				io.Copy(io.Discard, os.Stdin)
				os.Exit(3)
			}
		}
	}
	snap, _, err := s.Take(context.Background(), "quiet", 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("SNAPSHOT_CHILD_FAST") != "" && !snap.Took.Incremental {
		fmt.Fprintln(os.Stderr, "the second snapshot was not from what changed")
		return 1
	}
	return 0
}

// A SIGKILL during a snapshot (the process and its git) leaves a store
// that opens, lists only whole snapshots, and takes the next snapshot
// correctly. The snapshot is held at each point where the store changes
// until the kill, on any machine: a git wrapper holds a full snapshot's
// git add (with the index locked) and write-tree; a hook holds the
// in-process steps (blobs, trees, the commit, the ref's lock file) of a
// full snapshot and of one from what changed.
func TestSIGKILLDuringSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree of 300 files")
	}
	wd := t.TempDir()
	write(t, wd, "first.txt", "the snapshot before\n")
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	s := newStore(t, wd, Options{Dir: dir})
	first, _ := mustTake(t, s, "start", 1)
	s.Close()

	// 300 files of 8 KiB.
	for d := range 3 {
		for f := range 100 {
			write(t, wd, fmt.Sprintf("big/d%02d/f%03d.txt", d, f), randomText(8<<10, int64(d*100+f)))
		}
	}

	git := holdgit.New(t)
	type round struct {
		gitPoint, point string // held by the git wrapper, or in process
		fast            bool   // the held snapshot is one from what changed
	}
	rounds := []round{
		{gitPoint: holdgit.MidAdd}, {gitPoint: holdgit.BeforeWriteTree},
		{point: take.PointCommit}, {point: take.PointRefLocked},
		{point: take.PointBlobs, fast: true}, {point: take.PointTrees, fast: true},
		{point: take.PointCommit, fast: true}, {point: take.PointRefLocked, fast: true},
	}
	want := []string{first.ID} // the snapshots a kill must leave, newest first
	for i, r := range rounds {
		name := fmt.Sprintf("round %d (%s%s, fast %v)", i, r.gitPoint, r.point, r.fast)
		os.Remove(filepath.Join(dir, "index")) // make git hash every file again
		held := filepath.Join(t.TempDir(), "held")
		env := append(os.Environ(), childEnv+"=1", "SNAPSHOT_CHILD_DIR="+dir, "SNAPSHOT_CHILD_WORK="+wd, "SNAPSHOT_CHILD_GIT="+git.Path)
		if r.gitPoint != "" {
			git.Arm(t, r.gitPoint)
		} else {
			env = append(env, "SNAPSHOT_CHILD_HOLD="+r.point, "SNAPSHOT_CHILD_HELD="+held)
		}
		if r.fast {
			env = append(env, fmt.Sprintf("SNAPSHOT_CHILD_FAST=round %d\n", i))
		}
		killHeld(t, name, env, func(stderr func() string) {
			if r.gitPoint != "" {
				git.WaitHeld(t, 60*time.Second, stderr)
			} else {
				waitHeldFile(t, name, held, stderr)
			}
		})
		if r.gitPoint != "" {
			git.Release(t)
		}

		s := newStore(t, wd, Options{Dir: dir})
		list, err := s.List(context.Background())
		if err != nil {
			t.Fatalf("%s: List after SIGKILL: %v", name, err)
		}
		if r.fast {
			// The child's full snapshot before the held one is whole.
			if len(list) != len(want)+1 || list[1].ID != want[0] {
				t.Fatalf("%s: after SIGKILL the store lists %+v, want the child's full snapshot over %v", name, list, want)
			}
			want = append([]string{list[0].ID}, want...)
		}
		var got []string
		for _, l := range list {
			got = append(got, l.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: after SIGKILL mid-snapshot the store lists %v, want %v", name, got, want)
		}
		if out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"fsck", "--connectivity-only", "--no-dangling"}}); err != nil {
			t.Fatalf("%s: fsck after SIGKILL: %v\n%s", name, err, out)
		}
		s.Close()
	}

	// The next snapshots, full and then from what changed, are right.
	s = newStore(t, wd, Options{Dir: dir})
	s.Follow()
	snap, isNew := mustTake(t, s, "quiet", 3)
	if !isNew || snap.Parent != want[0] {
		t.Fatalf("the snapshot after the kills = %+v", snap)
	}
	got, err := s.git.Run(context.Background(), repo.Call{Args: []string{"cat-file", "blob", snap.ID + ":big/d02/f099.txt"}})
	if err != nil || string(got) != randomText(8<<10, 299) {
		t.Fatal("the snapshot after the kills holds wrong content")
	}
	write(t, wd, "fast.txt", "after the kills\n")
	s.NoteChanged([]string{"fast.txt"})
	snap, isNew = mustTake(t, s, "quiet", 4)
	if !isNew || !snap.Took.Incremental || snap.Modified != 1 {
		t.Fatalf("the snapshot from what changed after the kills = %+v", snap)
	}
	if got, err := s.git.Run(context.Background(), repo.Call{Args: []string{"cat-file", "blob", snap.ID + ":fast.txt"}}); err != nil || string(got) != "after the kills\n" {
		t.Fatalf("the snapshot from what changed after the kills holds %q (%v)", got, err)
	}
	if out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"fsck", "--no-dangling"}}); err != nil {
		t.Fatalf("fsck at the end: %v\n%s", err, out)
	}
}

// killHeld starts the test binary as a snapshot child with env, waits
// until it is held (wait, given the child's stderr so far), and kills
// its process group (the child and its git) with SIGKILL.
func killHeld(t *testing.T, name string, env []string, wait func(stderr func() string)) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	hold, holding, err := os.Pipe() // the child's stdin: nothing is ever written
	if err != nil {
		t.Fatal(err)
	}
	defer holding.Close()
	cmd.Stdin = hold
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hold.Close()
	wait(func() string { return stderr.String() })
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s: the child was not killed mid-way (%v)\n%s", name, err, stderr.String())
	}
	waitFor(t, func() bool { return syscall.Kill(-cmd.Process.Pid, 0) != nil }) // its git is gone too
}

// waitHeldFile waits until the child wrote held (it reached its point).
func waitHeldFile(t *testing.T, name, held string, stderr func() string) {
	t.Helper()
	testwait.Until(t, func() string { return name + ": the child did not reach the point; it said: " + stderr() }, func() bool {
		_, err := os.Stat(held)
		return err == nil
	})
}

// TestSIGKILLDuringFirstSnapshot: a SIGKILL while a first snapshot is
// written in process (its objects in a temporary pack; the pack in place,
// the index not) leaves a store that lists no snapshot, passes fsck, and
// takes the first snapshot again, right.
func TestSIGKILLDuringFirstSnapshot(t *testing.T) {
	wd := t.TempDir()
	for d := range 3 {
		for f := range 20 {
			write(t, wd, fmt.Sprintf("d%d/f%02d.txt", d, f), randomText(2<<10, int64(d*20+f)))
		}
	}
	for _, point := range []string{take.PointFirstObjects, take.PointFirstPacked} {
		dir := filepath.Join(t.TempDir(), "snapshots.git")
		held := filepath.Join(t.TempDir(), "held")
		env := append(os.Environ(), childEnv+"=1", "SNAPSHOT_CHILD_DIR="+dir, "SNAPSHOT_CHILD_WORK="+wd,
			"SNAPSHOT_CHILD_HOLD="+point, "SNAPSHOT_CHILD_HELD="+held)
		killHeld(t, point, env, func(stderr func() string) { waitHeldFile(t, point, held, stderr) })

		s := newStore(t, wd, Options{Dir: dir})
		if list, err := s.List(context.Background()); err != nil || len(list) != 0 {
			t.Fatalf("%s: after SIGKILL the store lists %+v (%v), want nothing", point, list, err)
		}
		if out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"fsck", "--strict", "--no-dangling"}}); err != nil {
			t.Fatalf("%s: fsck after SIGKILL: %v\n%s", point, err, out)
		}
		snap, _ := mustTake(t, s, "start", 1)
		if n := looseObjects(t, s); n != 1 {
			t.Fatalf("%s: the first snapshot after the kill was not written in process (%d loose objects)", point, n)
		}
		if got := treeOf(t, s, snap.ID)["d2/f19.txt"].content; got != randomText(2<<10, 59) || snap.Added != 60 {
			t.Fatalf("%s: the first snapshot after the kill holds %d files, d2/f19.txt %q", point, snap.Added, got)
		}
		if out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"fsck", "--strict", "--no-dangling"}}); err != nil {
			t.Fatalf("%s: fsck at the end: %v\n%s", point, err, out)
		}
		s.Close()
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
