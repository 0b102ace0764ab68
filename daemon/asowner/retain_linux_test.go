package asowner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/safefile"
)

// TestRetainEndsIdleWorkers: Retain ends the workers of the owners it is
// not told to keep, each reaped by the time it returns (no process, no
// zombie), and leaves the others running; a call through an ended one
// fails saying why, and For starts a new one for that owner.
func TestRetainEndsIdleWorkers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: workers for two owners")
	}
	dir, owner := ownerTree(t)
	other := Owner{UID: testOwnerID + 1, GID: testOwnerID + 1}
	file := filepath.Join(dir, "notes.md")
	writeFile(t, file, "mine\n")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, lines := newLog()
	pool := NewPool(Options{Logger: log})
	defer pool.Close()
	read := func(w *Worker) error {
		_, err := safefile.ReadFileWith(w.Opener(), file, false, 1<<10)
		return err
	}
	idle, kept := pool.For(owner), pool.For(other)
	for _, w := range []*Worker{idle, kept} {
		if err := read(w); err != nil {
			t.Fatalf("a read through %s: %v\n%s", w.name(), err, lines)
		}
	}
	idlePid, keptPid := idle.pid(), kept.pid()

	pool.Retain(map[uint32]bool{other.UID: true})
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(idlePid))); !os.IsNotExist(err) {
		st := ""
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(idlePid), "stat")); err == nil {
			st = string(b)
		}
		t.Errorf("the retired worker (pid %d) is still there (%v): %s", idlePid, err, st)
	}
	if !strings.Contains(lines.String(), "stopped the owner's worker: no agent acts as that owner any more") {
		t.Errorf("the log does not say the worker was stopped:\n%s", lines)
	}
	if err := read(idle); err == nil || !strings.Contains(err.Error(), "was stopped: no agent acts as that owner any more") {
		t.Errorf("a read through the retired worker: %v, want an error saying it was stopped", err)
	}
	if err := read(kept); err != nil || kept.pid() != keptPid {
		t.Errorf("the kept worker: read %v, pid %d then %d", err, keptPid, kept.pid())
	}

	again := pool.For(owner)
	if again == idle {
		t.Fatal("For handed back the retired worker")
	}
	if err := read(again); err != nil || again.pid() == 0 || again.pid() == idlePid {
		t.Errorf("the owner's next worker: read %v, pid %d (the retired one was %d)", err, again.pid(), idlePid)
	}
	pool.Retain(nil)
	for _, pid := range []int{keptPid, again.pid()} {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !os.IsNotExist(err) {
			t.Errorf("worker %d outlived Retain(nil): %v", pid, err)
		}
	}
}
