package snapshot

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/beneath"
)

// The workdir is the directory Open found, whatever its path leads to
// later. Open records it (os.SameFile: its device and inode); a restore
// opens the path again and acts only if it still leads there, through the
// handle it compared, so that a workdir given as a symbolic link and
// repointed after the start (or a directory replaced by another of the
// same name) is never written: the restore is refused, naming both
// directories, and the agent shows degraded ["snapshots"] with the same
// words (WorkdirProblem). A Take checks too (a stat), so snapshots of
// another directory are not taken as the agent's.

// workdirMoved is the refusal when the workdir's path no longer leads to
// the directory Open found, or nil.
func (s *Store) workdirMoved(now fs.FileInfo, err error) *capsule.Error {
	if err == nil && os.SameFile(s.workID, now) {
		return nil
	}
	to := "nothing that can be opened (" + errText(err) + ")"
	if err == nil {
		to = "another directory"
		if real, rerr := filepath.EvalSymlinks(s.work); rerr == nil {
			to = real
		}
	}
	return capsule.Refuse(capsule.CodeAgentMoved, "",
		"the workdir %s now leads to %s, not to %s, the directory the daemon started with: nothing there is snapshotted, restored or changed; point it back, or restart the daemon to take the new directory as the agent's",
		s.work, to, s.realWk)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// WorkdirProblem says, when the workdir's path no longer leads to the
// directory Open found (a link repointed, a directory replaced), why the
// store refuses to act; "" when it still does.
func (s *Store) WorkdirProblem() string {
	fi, err := os.Stat(s.work)
	if moved := s.workdirMoved(fi, err); moved != nil {
		return moved.Message
	}
	return ""
}

// openWork opens the workdir for a restore and checks it is the directory
// Open found: everything the restore does goes through this handle.
func (s *Store) openWork() (*beneath.Dir, error) {
	d, err := beneath.Open(s.work)
	if err != nil {
		return nil, s.workdirMoved(nil, err)
	}
	fi, err := d.Stat()
	if moved := s.workdirMoved(fi, err); moved != nil {
		d.Close()
		return nil, moved
	}
	return d, nil
}

// stillWork checks, before a restore changes anything, that the workdir's
// path still leads to the directory its handle holds (openWork compared
// it): a path repointed while the safety snapshot was taken (git reads by
// path) is refused too.
func (s *Store) stillWork() error {
	fi, err := os.Stat(s.work)
	if moved := s.workdirMoved(fi, err); moved != nil {
		return moved
	}
	return nil
}
