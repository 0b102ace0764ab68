package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/restore"
	"golang.org/x/sys/unix"
)

// swapEnv makes the test binary a child that swaps two names with
// renameat2(RENAME_EXCHANGE) as an attacker would time it: whenever the
// first name's directory changes (a restore is writing or removing in
// it), a burst of swapBurst swaps, after which both names are back, so
// that the next restore's safety snapshot sees the tree whole (a swap
// under git add fails the restore before it changes anything). It runs
// until its stdin ends, then says how many swaps it made. The test runs
// it as the workdir's owner: what an unprivileged user can do to a root
// daemon's restore.
const swapEnv = "SNAPSHOT_TEST_SWAP"

// swapBurst is even: a burst leaves both names as they were.
const swapBurst = 4000

func init() { children[swapEnv] = runSwapper }

func runSwapper() int {
	args := strings.Split(os.Getenv(swapEnv), "\n")
	a, b, target := args[0], args[1], args[2]
	var n atomic.Int64
	go func() {
		io.Copy(io.Discard, os.Stdin)
		fmt.Printf("%d\n", n.Load())
		os.Exit(0)
	}()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := unix.InotifyAddWatch(in, a, unix.IN_CREATE|unix.IN_DELETE|unix.IN_ATTRIB|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := unix.Read(in, buf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for range swapBurst {
			err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
			if err == unix.ENOENT {
				// The restore removed the link (a removal through a name
				// that was the link at that moment): make it again.
				missing := a
				if _, err := os.Lstat(b); err != nil {
					missing = b
				}
				err = os.Symlink(target, missing)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			n.Add(1)
		}
		// Both names back as they were, and what the burst itself caused
		// read and dropped: the next burst waits for the next change.
		if fi, err := os.Lstat(a); err == nil && !fi.IsDir() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if err := unix.SetNonblock(in, true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for {
			if _, err := unix.Read(in, buf); err != nil {
				break
			}
		}
		if err := unix.SetNonblock(in, false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
}

// raceOwner is the workdir's owner in the race test (no passwd entry is
// needed).
const raceOwner = 40001

// raceFiles is how many root-owned files the directory outside holds, as
// in the report that found the race.
const raceFiles = 3000

// TestRestoreRacingSymlinkSwaps: the daemon restores as root a workdir
// that uid 40001 owns, while that user swaps a directory of the workdir
// with a symbolic link to a root-owned 0700 directory outside it
// (renameat2 RENAME_EXCHANGE in a loop) for 30 s. Restores alternate
// between a snapshot that holds the directory's 3,000 files (they are
// written and given to the workdir's owner: the chown case) and one that
// lacks them (they are removed, the directory kept non-empty by a file
// both hold: the remove case). Afterwards every file of the directory
// outside is still there, root's, 0600, with its content.
func TestRestoreRacingSymlinkSwaps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon as root, the swapper as another user")
	}
	if testing.Short() {
		t.Skip("races restores for 30 s")
	}
	t.Parallel()
	top, err := os.MkdirTemp("", "restorerace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	work, secret := filepath.Join(top, "work"), filepath.Join(top, "secret")
	// The directory outside: root's, 0700, its files 0600.
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("f%04d", i) }
	for i := range raceFiles {
		if err := os.WriteFile(filepath.Join(secret, name(i)), []byte("root's secret "+name(i)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The workdir, the user's: d/ holds files of the same names, and keep,
	// which every snapshot holds (d/ is never emptied).
	write(t, work, "d/keep", "keep\n")
	for i := range raceFiles {
		write(t, work, "d/"+name(i), "the user's "+name(i)+"\n")
	}
	if err := os.Symlink(secret, filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(work, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, raceOwner, raceOwner)
	}); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, work, Options{Dir: filepath.Join(t.TempDir(), "snapshots.git")})
	with, _ := mustTake(t, s, "start", 1)
	for i := range raceFiles {
		if err := os.Remove(filepath.Join(work, "d", name(i))); err != nil {
			t.Fatal(err)
		}
	}
	without, _ := mustTake(t, s, "quiet", 1)

	// The swapper, as the workdir's owner: a copy of this test binary
	// where that user may run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "swapper")
	copyFile(t, self, bin, 0o755)
	var (
		cmd         *exec.Cmd
		stop        io.WriteCloser
		out, errOut strings.Builder
	)
	// A process forked elsewhere in this binary (a store's git) while the
	// copy was open for writing holds it open until that process execs:
	// starting the copy then fails with "text file busy" for a moment.
	for deadline := time.Now().Add(time.Minute); ; {
		cmd = exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), swapEnv+"="+filepath.Join(work, "d")+"\n"+filepath.Join(work, "link")+"\n"+secret)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: raceOwner, Gid: raceOwner}}
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if stop, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ETXTBSY) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	stopSwapper := func() {
		if stopped {
			return
		}
		stopped = true
		stop.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the swapper failed: %v\n%s", err, errOut.String())
		}
	}
	defer stopSwapper()

	ctx := context.Background()
	// acted counts the restores of each snapshot that got as far as
	// changing files (a swap under the safety snapshot's git add fails a
	// restore before that); failed those that stopped part way.
	acted := map[string]int{}
	var restores, failed, refused int
	var lastErr error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		for _, target := range []Snapshot{with, without} {
			restores++
			res, err := s.Restore(ctx, target.ID, nil, false)
			if res.Safety != "" && len(res.Changes) > 0 {
				acted[target.ID]++
			}
			if err != nil {
				failed++
				lastErr = err
			}
			refused += len(res.Refused)
		}
	}
	stopSwapper()
	t.Logf("%d restores (%d failed, last: %v), %d acted writing the files, %d removing them, %d files refused, %s swaps",
		restores, failed, lastErr, acted[with.ID], acted[without.ID], refused, strings.TrimSpace(out.String()))
	if acted[with.ID] == 0 || acted[without.ID] == 0 {
		t.Fatalf("the restores that wrote the files (%d) or removed them (%d) never got to act: the race was not run", acted[with.ID], acted[without.ID])
	}

	// Nothing outside the workdir changed.
	fi, err := os.Lstat(secret)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 || fi.Mode() != fs.ModeDir|0o700 {
		bad = append(bad, fmt.Sprintf("the directory outside is now %v %d:%d", fi.Mode(), st.Uid, st.Gid))
	}
	ents, err := os.ReadDir(secret)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != raceFiles {
		bad = append(bad, fmt.Sprintf("the directory outside holds %d files, had %d", len(ents), raceFiles))
	}
	for i := range raceFiles {
		p := filepath.Join(secret, name(i))
		fi, err := os.Lstat(p)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name(i), err))
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		b, _ := os.ReadFile(p)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode() != 0o600 || string(b) != "root's secret "+name(i)+"\n" {
			bad = append(bad, fmt.Sprintf("%s: now %v %d:%d %q", name(i), fi.Mode(), st.Uid, st.Gid, b))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("a root restore racing symlink swaps changed %d things outside the workdir:\n%s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
}

// copyFile copies a file, as mode.
func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// A restore that fills the workdir's disk stops part way, says so with
// its safety snapshot, and is reported as interrupted with its journal
// kept; once there is room again, the next Open finishes it.
func TestRestoreOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs to fill")
	}
	mnt, err := os.MkdirTemp("", "restorefull")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		os.Remove(mnt)
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		os.Remove(mnt)
	})
	wd := filepath.Join(mnt, "work")
	big := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB
	for i := range 16 {
		write(t, wd, fmt.Sprintf("data/f%02d.bin", i), fmt.Sprintf("%02d", i)+big)
	}
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	s := newStore(t, wd, Options{Dir: dir})
	full, _ := mustTake(t, s, "start", 1)
	if err := os.RemoveAll(filepath.Join(wd, "data")); err != nil {
		t.Fatal(err)
	}
	write(t, wd, "small.txt", "the tree before the restore\n")
	mustTake(t, s, "quiet", 1)
	// Room for a few of the 16 files only.
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	res, err := s.Restore(context.Background(), full.ID, nil, false)
	if !errors.Is(err, syscall.ENOSPC) || res.Safety == "" || !strings.Contains(err.Error(), repo.Short(res.Safety)) {
		t.Fatalf("a restore onto a full disk = %v (safety %q), want ENOSPC naming the safety snapshot", err, res.Safety)
	}
	r, ok := s.Interrupted()
	if !ok || r.Finished || r.Safety != res.Safety || !strings.Contains(r.Problem, "next start") || r.Files != 17 {
		t.Fatalf("Interrupted() after the full disk = %+v, %v", r, ok)
	}
	if _, err := os.Stat(filepath.Join(dir, restore.JournalFile)); err != nil {
		t.Fatalf("the journal of the stopped restore is gone: %v", err)
	}
	s.Close()

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = newStore(t, wd, Options{Dir: dir})
	r, ok = s.Interrupted()
	if !ok || !r.Finished || r.Safety != res.Safety || r.Problem != "" {
		t.Fatalf("Interrupted() after the next start = %+v, %v", r, ok)
	}
	for i := range 16 {
		if got := read(t, wd, fmt.Sprintf("data/f%02d.bin", i)); got != fmt.Sprintf("%02d", i)+big {
			t.Fatalf("data/f%02d.bin is not restored after the finish", i)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "small.txt")); !os.IsNotExist(err) {
		t.Fatalf("the finish left small.txt, which the snapshot lacks: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(wd, "data"))
	if len(ents) != 16 {
		t.Fatalf("data/ holds %d entries after the finish (a temporary file left?)", len(ents))
	}
}
