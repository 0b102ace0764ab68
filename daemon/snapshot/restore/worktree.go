package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/daemonside/beneath"
)

// workTree is the workdir as a restore reads and changes it: through the
// workdir's handle (Workdir.OpenDir) and directory handles opened beneath it,
// none through a symbolic link (internal/daemonside/beneath). A name is checked and
// acted on in the same directory handle, so a directory swapped for a
// link in between (its owner may, while a root daemon restores) never
// leads the restore out of the workdir: the handle still holds the
// directory that was checked, wherever it moved, and a link met on the
// way is not followed (the path is refused and named).
type workTree struct {
	top    *beneath.Dir
	dirs   map[string]*beneath.Dir // opened beneath top, by path
	owner  owner                   // the workdir's owner
	asRoot bool                    // owners are set (the daemon's files would be root's)
	umask  fs.FileMode
}

// maxOpenDirs bounds the directory handles kept open at once.
const maxOpenDirs = 256

func newWorkTree(top *beneath.Dir) *workTree {
	w := &workTree{top: top, dirs: map[string]*beneath.Dir{}, asRoot: os.Geteuid() == 0, umask: processUmask()}
	if fi, err := top.Stat(); err == nil {
		if uid, gid, ok := workdir.OwnerOf(fi); ok {
			w.owner = owner{uid, gid}
		}
	}
	return w
}

// close closes every handle, the workdir's too.
func (w *workTree) close() {
	for rel, d := range w.dirs {
		d.Close()
		delete(w.dirs, rel)
	}
	w.top.Close()
}

// dir returns the handle of directory rel ("" is the workdir). A link on
// the way is a *beneath.SymlinkError naming it. The handle is the tree's:
// use it before the next call of dir.
func (w *workTree) dir(rel string) (*beneath.Dir, error) {
	if rel == "" {
		return w.top, nil
	}
	if d, ok := w.dirs[rel]; ok {
		return d, nil
	}
	if len(w.dirs) >= maxOpenDirs {
		for k, d := range w.dirs {
			d.Close()
			delete(w.dirs, k)
		}
	}
	d, err := w.top.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	w.dirs[rel] = d
	return d, nil
}

// forget drops the handles of directory rel and of those below it: it
// was removed, and one made in its place is another.
func (w *workTree) forget(rel string) {
	for k, d := range w.dirs {
		if repo.Under(k, rel) {
			d.Close()
			delete(w.dirs, k)
		}
	}
}

// lstat describes rel, a link as a link.
func (w *workTree) lstat(rel string) (fs.FileInfo, error) {
	parent, name, _ := repo.CutLast(rel)
	d, err := w.dir(parent)
	if err != nil {
		return nil, err
	}
	return d.Lstat(name)
}

// linkOnPath returns the first directory on rel's way (not rel itself)
// that is a symbolic link, or "". A missing directory ends the check:
// nothing below it exists.
func (w *workTree) linkOnPath(rel string) string {
	parent, _, ok := repo.CutLast(rel)
	if !ok {
		return ""
	}
	_, err := w.dir(parent)
	if se := (*beneath.SymlinkError)(nil); errors.As(err, &se) {
		return se.Path
	}
	return ""
}

// errRefused is a path a restore leaves alone once it has begun (a link,
// or a directory, met where it expected something else: someone changed
// the tree meanwhile); Refusal says why.
type errRefused struct{ Refusal }

func (e *errRefused) Error() string { return e.Path + ": " + e.Reason }

// refusedBy makes err a refusal of rel when it is a link met on the way,
// or a directory or a link where a file goes; other errors stay.
func refusedBy(rel, doing string, err error) error {
	var se *beneath.SymlinkError
	switch {
	case errors.As(err, &se):
		return &errRefused{Refusal{Path: rel, Reason: fmt.Sprintf("%s is a symbolic link where the snapshot has a directory; it is not followed, and %s", se.Path, doing)}}
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		return &errRefused{Refusal{Path: rel, Reason: "a directory is in the way now; " + doing}}
	case errors.Is(err, syscall.ENOTDIR):
		return &errRefused{Refusal{Path: rel, Reason: "a file or a link is in the way of its directory now; " + doing}}
	}
	return err
}

// remove deletes the file (or link) rel, never through a link on its way,
// then each directory it leaves empty (a link there is not a directory:
// it stays). A file already gone is no error.
func (w *workTree) remove(rel string) error {
	parent, name, _ := repo.CutLast(rel)
	d, err := w.dir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = d.Remove(name)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refusedBy(rel, "it was not removed", err)
	}
	for dir := parent; dir != ""; {
		up, base, _ := repo.CutLast(dir)
		d, err := w.dir(up)
		if err != nil || d.RemoveDir(base) != nil {
			break // not empty, not a directory, or not ours
		}
		w.forget(dir)
		dir = up
	}
	return nil
}

// mkdirs returns the handle of directory rel, making it and the
// directories above it that are missing: as root, each is given to the
// workdir's owner; its permissions are those the snapshot recorded
// (modes, never more than git's), else git'rs.
func (w *workTree) mkdirs(rel string, modes map[string]fs.FileMode) (*beneath.Dir, error) {
	d, err := w.dir(rel)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return d, err
	}
	up, name, _ := repo.CutLast(rel)
	parent, err := w.mkdirs(up, modes)
	if err != nil {
		return nil, err
	}
	made := true
	if err := parent.Mkdir(name, 0o777); errors.Is(err, fs.ErrExist) {
		made = false // made meanwhile: it is someone else's
	} else if err != nil {
		return nil, err
	}
	if d, err = w.dir(rel); err != nil || !made {
		return d, err
	}
	fi, err := d.Stat()
	if err != nil {
		return nil, err
	}
	// Only the directory made here, as it was made (by this process,
	// empty): one put in its place in between is left as it is.
	if uid, _, ok := workdir.OwnerOf(fi); ok && uid != os.Geteuid() {
		return d, nil
	}
	if w.asRoot {
		if err := d.Chown(w.owner.uid, w.owner.gid); err != nil {
			return nil, err
		}
	}
	if m, ok := modes[rel]; ok && m != fi.Mode().Perm() {
		if err := d.Chmod(m & fi.Mode().Perm()); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// tempName is the name a restore writes file i of its journal under
// before renaming it into place: a restore killed in between leaves it,
// and the next start (FinishInterrupted) removes it by that name.
func tempName(journalID string, i int) string {
	return ".continuityd-restore-" + journalID + "-" + strconv.Itoa(i)
}

// emptiedBy reports whether every file under the directory rel is one the
// restore removes (a snapshotted file the snapshot lacks), so that the
// directory is gone before the restore writes rel.
func (w *workTree) emptiedBy(rel string, removing map[string]bool) bool {
	d, err := w.dir(rel)
	if err != nil {
		return false
	}
	ents, err := d.ReadDir()
	if err != nil {
		return false
	}
	for _, e := range ents {
		p := rel + "/" + e.Name()
		if e.IsDir() {
			if !w.emptiedBy(p, removing) {
				return false
			}
		} else if !removing[p] {
			return false
		}
	}
	return true
}

// processUmask is the process's umask, which git's checkout applied to
// what it wrote (0666 or 0777 less it): a restore writes the same. Linux
// says it in /proc; elsewhere the usual 022 is assumed (reading it means
// setting it, which would race every file the daemon makes meanwhile).
func processUmask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n) & fs.ModePerm
				}
			}
		}
	}
	return 0o022
}
