// Package workdir is the agent's work tree as the snapshot store holds
// it: the directory Open found at the workdir's path, whatever that path
// leads to later.
//
// Open records it (os.SameFile: its device and inode); a restore opens
// the path again and acts only if it still leads there, through the
// handle it compared, so that a workdir given as a symbolic link and
// repointed after the start (or a directory replaced by another of the
// same name) is never written: the restore is refused, naming both
// directories, and the agent shows degraded ["snapshots"] with the same
// words (Problem). A Take checks too (a stat), so snapshots of another
// directory are not taken as the agent's.
package workdir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/daemonside/beneath"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
)

// Workdir is the directory Open found at a workdir's path.
type Workdir struct {
	path string      // absolute and clean
	real string      // path with symbolic links resolved, as Open found it
	id   fs.FileInfo // the directory Open found

	// The last look at the path (a Problem, Check or OpenDir), which
	// Problem answers with for problemFresh: every resume and status asks
	// it, and a stat a request is a path walk on the answer's way.
	mu       sync.Mutex
	lookedAt time.Time
	lastLook string
	clock    func() time.Time // time.Now; tests set it
}

// problemFresh is how long Problem answers from the last look. What acts
// on the tree (a Take, a restore) always looks again first; only the
// degraded flag can lag a repointed path by this much.
const problemFresh = time.Second

// Open records the directory the absolute, clean path leads to now.
func Open(path string) (*Workdir, error) {
	id, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: workdir: %w", err)
	} else if !id.IsDir() {
		return nil, fmt.Errorf("snapshot store: workdir %s is not a directory", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: workdir: %w", err)
	}
	return &Workdir{path: path, real: real, id: id}, nil
}

// Path is the workdir's path.
func (w *Workdir) Path() string { return w.path }

// Real is the directory Open found, its path with links resolved.
func (w *Workdir) Real() string { return w.real }

// ID is the device and inode of the directory Open found; ok is false
// where the system does not give them.
func (w *Workdir) ID() (dev, ino uint64, ok bool) { return FileID(w.id) }

// moved is the refusal when the workdir's path no longer leads to the
// directory Open found, or nil.
func (w *Workdir) moved(now fs.FileInfo, err error) *capsule.Error {
	if err == nil && os.SameFile(w.id, now) {
		return nil
	}
	to := "nothing that can be opened (" + errText(err) + ")"
	if err == nil {
		to = "another directory"
		if real, rerr := filepath.EvalSymlinks(w.path); rerr == nil {
			to = real
		}
	}
	return capsule.Refuse(capsule.CodeAgentMoved, "",
		"the workdir %s now leads to %s, not to %s, the directory the daemon started with: nothing there is snapshotted, restored or changed; point it back, or restart the daemon to take the new directory as the agent's",
		w.path, to, w.real)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Problem says, when the workdir's path no longer leads to the directory
// Open found (a link repointed, a directory replaced), why the store
// refuses to act; "" when it still does.
func (w *Workdir) Problem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lookedAt.IsZero() && w.now().Sub(w.lookedAt) < problemFresh {
		return w.lastLook
	}
	fi, err := os.Stat(w.path)
	w.lookedLocked(w.moved(fi, err))
	return w.lastLook
}

// looked records what a look at the path found, for Problem.
func (w *Workdir) looked(moved *capsule.Error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lookedLocked(moved)
}

func (w *Workdir) lookedLocked(moved *capsule.Error) {
	was := w.lastLook
	w.lookedAt, w.lastLook = w.now(), ""
	if moved != nil {
		w.lastLook = moved.Message
	}
	if w.lastLook != was {
		viewstamp.Changed() // resume names the snapshots degraded, or no longer
	}
}

func (w *Workdir) now() time.Time {
	if w.clock != nil {
		return w.clock()
	}
	return time.Now()
}

// OpenDir opens the workdir for a restore and checks it is the directory
// Open found: everything the restore does goes through this handle.
func (w *Workdir) OpenDir() (*beneath.Dir, error) {
	d, err := beneath.Open(w.path)
	if err != nil {
		moved := w.moved(nil, err)
		w.looked(moved)
		return nil, moved
	}
	fi, err := d.Stat()
	moved := w.moved(fi, err)
	w.looked(moved)
	if moved != nil {
		d.Close()
		return nil, moved
	}
	return d, nil
}

// Check checks that the workdir's path still leads to the directory Open
// found: before a Take (snapshots of another directory are not the
// agent's), and before a restore changes anything, that it leads to the
// directory its handle holds (OpenDir compared it): a path repointed while
// the safety snapshot was taken (git reads by path) is refused too.
func (w *Workdir) Check() error {
	fi, err := os.Stat(w.path)
	moved := w.moved(fi, err)
	w.looked(moved)
	if moved != nil {
		return moved
	}
	return nil
}
