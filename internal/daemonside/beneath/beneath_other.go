//go:build !linux

package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Dir is an open directory: off Linux, an os.Root, which never leaves
// the directory but follows a link that stays inside it. OpenDir checks
// each name for a link before it opens it (a link swapped in between is
// followed, inside).
type Dir struct {
	r    *os.Root
	name string
}

// Open opens the directory at path.
func Open(p string) (*Dir, error) {
	r, err := os.OpenRoot(p)
	if err != nil {
		return nil, err
	}
	return &Dir{r: r, name: p}, nil
}

// Name is the path the directory was opened by.
func (d *Dir) Name() string { return d.name }

// Close closes the handle.
func (d *Dir) Close() error { return d.r.Close() }

// Stat describes the directory itself.
func (d *Dir) Stat() (fs.FileInfo, error) { return d.r.Stat(".") }

// OpenDir opens the directory rel below d; a symbolic link met is a
// *SymlinkError naming it.
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	segs, err := splitRel(rel)
	if err != nil {
		return nil, err
	}
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		fi, err := d.r.Lstat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &SymlinkError{Path: p}
		}
	}
	r, err := d.r.OpenRoot(rel)
	if err != nil {
		return nil, err
	}
	return &Dir{r: r, name: path.Join(d.name, rel)}, nil
}

// Lstat describes name in d, a link as a link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return d.r.Lstat(name)
}

// ReadDir lists the directory's entries.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	f, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// Mkdir makes the directory name in d.
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.r.Mkdir(name, perm)
}

// Remove removes name in d, a file or a link; a directory is left.
func (d *Dir) Remove(name string) error {
	fi, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &fs.PathError{Op: "remove", Path: d.name + "/" + name, Err: errIsDir}
	}
	return d.r.Remove(name)
}

// RemoveDir removes name in d if it is an empty directory.
func (d *Dir) RemoveDir(name string) error {
	fi, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "rmdir", Path: d.name + "/" + name, Err: errNotDir}
	}
	return d.r.Remove(name)
}

// Lchown gives name in d to uid and gid.
func (d *Dir) Lchown(name string, uid, gid int) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.r.Lchown(name, uid, gid)
}

// Chown gives the directory itself to uid and gid.
func (d *Dir) Chown(uid, gid int) error { return d.r.Chown(".", uid, gid) }

// Chmod sets the directory's own permissions.
func (d *Dir) Chmod(perm fs.FileMode) error { return d.r.Chmod(".", perm) }

// Create makes the file name in d, which must not exist.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return d.r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// Symlink makes name in d a symbolic link to target.
func (d *Dir) Symlink(target, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.r.Symlink(target, name)
}

// Readlink reads the link name in d.
func (d *Dir) Readlink(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return d.r.Readlink(name)
}

// Rename renames from to to, both in d.
func (d *Dir) Rename(from, to string) error {
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	return d.r.Rename(from, to)
}

// Sync flushes the directory's entries where the system can.
func (d *Dir) Sync() error {
	f, err := d.r.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	f.Sync() // not every system syncs a directory
	return nil
}

// SyncFS flushes what was written (off Linux: each file's own Sync is the
// caller's; nothing more is done here).
func (d *Dir) SyncFS() error { return nil }

// Errors where Linux's system calls say EISDIR and ENOTDIR.
var (
	errIsDir  = errors.New("is a directory")
	errNotDir = errors.New("not a directory")
)
