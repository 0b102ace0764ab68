//go:build unix

package api

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// workdirOwner is the uid owning dir; ok is false without a workdir.
func workdirOwner(dir string) (uint32, bool) {
	if dir == "" {
		return 0, false
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// processGroups reads the supplementary groups of process pid from
// /proc/PID/status; ok is false where there is no such file.
func processGroups(pid int) (groups []uint32, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, found := strings.CutPrefix(line, "Groups:")
		if !found {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if id, err := strconv.ParseUint(f, 10, 32); err == nil {
				groups = append(groups, uint32(id))
			}
		}
		return groups, true
	}
	return nil, false
}
