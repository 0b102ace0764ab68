package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// finishTimeout bounds the finish of an interrupted restore at Open: it
// may write as many files as the restore did, past Open's own bound (a
// half restored tree is worse than a slow start).
const finishTimeout = 10 * time.Minute

// finishing is what a restore that finishes an interrupted one carries:
// the interrupted one's journal, and its files (the finish changes no
// others).
type finishing struct {
	prior journalHead
	only  map[string]bool
}

// FinishInterrupted finishes the restore a journal left in the store (see
// journal.go) and reports it; with no journal, it loads the report the
// last run kept.
func (rs *Restorer) FinishInterrupted(ctx context.Context) {
	path := filepath.Join(rs.dir, JournalFile)
	head, done, err := readJournal(path)
	if errors.Is(err, fs.ErrNotExist) {
		rs.loadInterrupted()
		return
	}
	found := rs.now().UTC()
	if err != nil {
		aside := path + ".damaged"
		os.Rename(path, aside)
		rs.setInterrupted(&Interrupted{Found: found, Problem: fmt.Sprintf(
			"a restore was interrupted and its journal cannot be read (%v): the tree may be half restored; the journal is set aside as %s", err, aside)})
		rs.log.Warn("snapshot store: a restore was interrupted and its journal cannot be read; the tree may be half restored", "journal", aside, "err", err)
		return
	}
	r := head.report(done, found)
	rs.interruptedPaths = make([]string, 0, len(head.Changes))
	for _, c := range head.Changes {
		rs.interruptedPaths = append(rs.interruptedPaths, termsafe.Exact(c.Path))
	}
	if dev, ino, ok := rs.workdir.ID(); ok && head.Dev != 0 && (dev != head.Dev || ino != head.Ino) {
		r.Problem = fmt.Sprintf("the workdir %s is not the directory the restore began in (%s), so it was not finished there: point the workdir back and restart the daemon, or remove %s to leave it unfinished",
			rs.work, head.Workdir, path)
		rs.setInterrupted(&r)
		return
	}
	rs.removeTemps(head)
	only := make(map[string]bool, len(head.Changes))
	for _, c := range head.Changes {
		only[c.Path] = true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	res, err := rs.restore(ctx, head.Snapshot, head.Paths, false, &finishing{prior: head, only: only}, nil)
	if err != nil {
		r.Problem = "finishing it failed: " + err.Error() + "; the next start tries again"
		rs.setInterrupted(&r)
		return
	}
	r.Finished, r.FinishSafety = true, res.Safety
	rs.setInterrupted(&r)
}

// removeTemps removes the files a killed restore was writing under their
// temporary names (tempName) before it could rename them into place.
func (rs *Restorer) removeTemps(head journalHead) {
	top, err := rs.workdir.OpenDir()
	if err != nil {
		return
	}
	w := newWorkTree(top)
	defer w.close()
	for i, c := range head.Changes {
		if c.Remove {
			continue
		}
		parent, _, _ := repo.CutLast(c.Path)
		if d, err := w.dir(parent); err == nil {
			d.Remove(tempName(head.ID, i))
		}
	}
}

// HoldEnv is a test hook, read by New: "POINT FIFO" holds every
// restore of the store at POINT ("before-first": its journal written,
// nothing changed; "after-N": N files changed; "after-last": every file
// changed, the journal still there) until the test lets it go: it writes
// FIFO.held, then opens the named pipe FIFO (which the test made) for
// reading, which waits for a writer, and reads it to its end. A test
// kills the daemon there with SIGKILL, on any machine's speed.
const HoldEnv = "CONTINUITYD_TEST_HOLD_RESTORE"

// holdFromEnv is the hook HoldEnv asks for, or nil.
func holdFromEnv() func(point string) {
	v := os.Getenv(HoldEnv)
	point, fifo, ok := strings.Cut(v, " ")
	if !ok || point == "" || fifo == "" {
		return nil
	}
	return func(at string) {
		if at != point {
			return
		}
		if err := os.WriteFile(fifo+".held", []byte(at), 0o600); err != nil {
			return
		}
		if f, err := os.Open(fifo); err == nil {
			io.Copy(io.Discard, f)
			f.Close()
		}
	}
}

// hold runs the restore hook at point, if there is one.
func (rs *Restorer) hold(point string) {
	if rs.hook != nil {
		rs.hook(point)
	}
}
