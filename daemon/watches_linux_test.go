package daemon

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// inotifyWatchesOn counts what the kernel says this process watches in
// tree: the inotify watches on its directories (read from
// /proc/self/fdinfo, matched by inode) and the inotify instances holding
// them. It is the cost two agents on one workdir pay, measured outside the
// code under test.
func inotifyWatchesOn(t *testing.T, tree string) (watches, instances int) {
	t.Helper()
	inodes := map[uint64]bool{}
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if link, _ := os.Readlink("/proc/self/fd/" + fd.Name()); link != "anon_inode:inotify" {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		held := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			for _, field := range strings.Fields(sc.Text()) {
				if hex, ok := strings.CutPrefix(field, "ino:"); ok {
					if ino, err := strconv.ParseUint(hex, 16, 64); err == nil && inodes[ino] {
						held++
					}
				}
			}
		}
		f.Close()
		if held > 0 {
			watches += held
			instances++
		}
	}
	return watches, instances
}
