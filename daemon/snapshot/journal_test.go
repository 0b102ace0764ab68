package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/restore"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// restoreChildEnv makes the test binary a child that opens the store
// $SNAPSHOT_CHILD_DIR of $SNAPSHOT_CHILD_WORK and restores the whole of
// snapshot $SNAPSHOT_CHILD_RESTORE; HoldRestoreEnv holds it where the
// test kills it.
const restoreChildEnv = "SNAPSHOT_TEST_RESTORE_CHILD"

func init() { children[restoreChildEnv] = runRestoreChild }

func runRestoreChild() int {
	s, err := Open(context.Background(), Options{
		Dir: os.Getenv("SNAPSHOT_CHILD_DIR"), Workdir: os.Getenv("SNAPSHOT_CHILD_WORK"),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := s.Restore(context.Background(), os.Getenv(restoreChildEnv), nil, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killTree is the tree of the kill test in one of its two versions: the
// restore removes files of one and writes (adds, modifies) the other's.
func killTree(t *testing.T, wd string, version int) {
	t.Helper()
	os.RemoveAll(filepath.Join(wd, "t"))
	for i := range 40 {
		if (i%3 == 0) == (version == 1) {
			continue // in one version only
		}
		write(t, wd, fmt.Sprintf("t/d%d/f%02d.txt", i%4, i), fmt.Sprintf("version %d of file %d\n", version, i))
	}
	// A name of each version that JSON cannot carry as it is.
	write(t, wd, fmt.Sprintf("t/odd/line\nbreak-\xff-%d.txt", version), "a name of bytes\n")
}

// A restore killed with SIGKILL before its first file, after some files,
// and after its last file (its journal still there) is finished at the
// next Open: the tree is the snapshot's, no temporary file is left, and
// Interrupted reports it with the safety snapshot, which undoes it.
func TestSIGKILLDuringRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("restores in child processes")
	}
	for _, point := range []string{"before-first", "after-5", "after-last"} {
		t.Run(point, func(t *testing.T) {
			wd := t.TempDir()
			dir := filepath.Join(t.TempDir(), "snapshots.git")
			killTree(t, wd, 1)
			s := newStore(t, wd, Options{Dir: dir})
			v1, _ := mustTake(t, s, "start", 1)
			killTree(t, wd, 2)
			mustTake(t, s, "quiet", 1)
			write(t, wd, "t/late.txt", "not snapshotted yet: the safety snapshot holds it\n")
			before := contents(t, wd)
			s.Close()

			fifo := filepath.Join(t.TempDir(), "hold")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), restoreChildEnv+"="+v1.ID, "SNAPSHOT_CHILD_DIR="+dir, "SNAPSHOT_CHILD_WORK="+wd,
				HoldRestoreEnv+"="+point+" "+fifo)
			killHeld(t, point, env, func(stderr func() string) { waitHeldFile(t, point, fifo+".held", stderr) })
			if _, err := os.Stat(filepath.Join(dir, restore.JournalFile)); err != nil {
				t.Fatalf("killed at %s, the restore left no journal: %v", point, err)
			}

			s = newStore(t, wd, Options{Dir: dir})
			want := treeOf(t, s, v1.ID)
			got := contents(t, wd)
			for p, e := range want {
				if got[p] != e.content {
					t.Errorf("killed at %s, then finished: %s holds %q, want %q", point, p, got[p], e.content)
				}
			}
			for p := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("killed at %s, then finished: %s is left", point, p)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, restore.JournalFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("killed at %s: the journal is still there after the finish: %v", point, err)
			}
			r, ok := s.Interrupted()
			if !ok || !r.Finished || r.Problem != "" || r.Snapshot != v1.ID || r.Safety == "" || r.Files == 0 || r.FinishSafety == "" {
				t.Fatalf("killed at %s: Interrupted() = %+v, %v", point, r, ok)
			}
			if changed := s.InterruptedChanges(); len(changed) != r.Files || !slices.Contains(changed, "t/late.txt") ||
				!slices.Contains(changed, termsafe.Exact("t/odd/line\nbreak-\xff-2.txt")) {
				t.Fatalf("killed at %s: InterruptedChanges() = %v", point, changed)
			}
			switch point {
			case "before-first":
				if r.Done != 0 {
					t.Errorf("killed before the first file, Done = %d", r.Done)
				}
			case "after-last":
				if r.Done < r.Files {
					t.Errorf("killed after the last file, Done = %d of %d", r.Done, r.Files)
				}
			}
			// The safety snapshot is the tree before the restore; it is kept
			// for the next start too, and undoes the restore.
			if s.Close(); true {
				s = newStore(t, wd, Options{Dir: dir})
			}
			if again, ok := s.Interrupted(); !ok || again.Safety != r.Safety || again.Found != r.Found {
				t.Fatalf("killed at %s: after a restart, Interrupted() = %+v, %v", point, again, ok)
			}
			if _, err := s.Restore(context.Background(), r.Safety, nil, false); err != nil {
				t.Fatal(err)
			}
			if d := diffContents(before, contents(t, wd)); d != "" {
				t.Fatalf("killed at %s: the safety snapshot %s does not undo the restore:\n%s", point, repo.Short(r.Safety), d)
			}
			// A successful restore acknowledges the report.
			if r, ok := s.Interrupted(); ok {
				t.Fatalf("killed at %s: still reported after a successful restore: %+v", point, r)
			}
			if _, err := os.Stat(filepath.Join(dir, restore.InterruptedFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("killed at %s: the report file is still there: %v", point, err)
			}
		})
	}
}

// contents maps each regular file under dir (relative, with "/") to its
// content.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffContents(want, got map[string]string) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, "missing "+p)
		} else if g != w {
			lines = append(lines, fmt.Sprintf("%s: %q, want %q", p, g, w))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, "extra "+p)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// A workdir given as a symbolic link and repointed after Open is not
// restored into, nor snapshotted: the refusal names both directories,
// and nothing in either changes.
func TestWorkdirLinkRepointed(t *testing.T) {
	top := t.TempDir()
	a, b, link := filepath.Join(top, "a"), filepath.Join(top, "b"), filepath.Join(top, "work")
	write(t, a, "f.txt", "a's file, version 1\n")
	write(t, b, "f.txt", "b's own file\n")
	write(t, b, "only-b.txt", "b's other file\n")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, link, Options{})
	v1, _ := mustTake(t, s, "start", 1)
	write(t, a, "f.txt", "a's file, version 2\n")
	mustTake(t, s, "quiet", 1)
	if p := s.WorkdirProblem(); p != "" {
		t.Fatalf("WorkdirProblem() before the link moved = %q", p)
	}

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	beforeA, beforeB := fingerprint(t, a), fingerprint(t, b)
	_, err := s.Restore(context.Background(), v1.ID, nil, false)
	var ce *capsule.Error
	if !errors.As(err, &ce) || ce.Code != capsule.CodeAgentMoved || !strings.Contains(ce.Message, a) || !strings.Contains(ce.Message, b) || !strings.Contains(ce.Message, "restart") {
		t.Fatalf("a restore after the workdir link moved = %v, want AGENT_MOVED naming %s and %s and the way out", err, a, b)
	}
	if _, _, err := s.Take(context.Background(), "quiet", 2); !errors.As(err, &ce) || ce.Code != capsule.CodeAgentMoved {
		t.Fatalf("a snapshot after the workdir link moved = %v", err)
	}
	if d := diffFingerprints(beforeB, fingerprint(t, b)) + diffFingerprints(beforeA, fingerprint(t, a)); d != "" {
		t.Fatalf("a refused restore changed files:\n%s", d)
	}
	if p := s.WorkdirProblem(); !strings.Contains(p, b) {
		t.Fatalf("WorkdirProblem() = %q", p)
	}
	if list, _ := s.List(context.Background()); len(list) != 2 {
		t.Fatalf("the refused restore took a safety snapshot: %d listed", len(list))
	}

	// Pointed back, it restores again.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(context.Background(), v1.ID, nil, false); err != nil || read(t, a, "f.txt") != "a's file, version 1\n" {
		t.Fatalf("a restore with the link pointed back: %v", err)
	}
}
