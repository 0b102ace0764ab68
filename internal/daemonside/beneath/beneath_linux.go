package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Dir is an open directory.
type Dir struct {
	f    *os.File
	name string // the path it was opened by, for errors
}

// Open opens the directory at path. Links on path are followed: it is the
// caller's own (the configured workdir), and what it leads to is the
// caller's to check (Stat, os.SameFile).
func Open(p string) (*Dir, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), p), name: p}, nil
}

// Name is the path the directory was opened by (Open's, joined with each
// OpenDir's).
func (d *Dir) Name() string { return d.name }

// Close closes the handle.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) fd() int { return int(d.f.Fd()) }

func (d *Dir) err(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: d.name + "/" + name, Err: err}
}

// Stat describes the directory itself (fstat).
func (d *Dir) Stat() (fs.FileInfo, error) { return d.f.Stat() }

// OpenDir opens the directory rel ("a/b") below d. No symbolic link is
// followed on the way: one met is a *SymlinkError naming it.
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	segs, err := splitRel(rel)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(d.fd(), rel)
	if errors.Is(err, errNoOpenat2) {
		fd, err = d.walk(segs)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			if link := d.linkOn(segs); link != "" {
				return nil, &SymlinkError{Path: link}
			}
		}
		if errors.Is(err, unix.ELOOP) {
			// A link that was swapped away again before it could be named.
			return nil, &SymlinkError{Path: rel}
		}
		var se *SymlinkError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, d.err("open", rel, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path.Join(d.name, rel)), name: path.Join(d.name, rel)}, nil
}

// dirFlags open a directory, never through a final link.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// walk opens segs one name at a time, each with O_NOFOLLOW: the way
// without openat2.
func (d *Dir) walk(segs []string) (int, error) {
	cur := d.fd()
	for i, s := range segs {
		fd, err := unix.Openat(cur, s, dirFlags, 0)
		if cur != d.fd() {
			unix.Close(cur)
		}
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				// Which one: the caller names the link.
				return -1, err
			}
			return -1, &fs.PathError{Op: "open", Path: d.name + "/" + strings.Join(segs[:i+1], "/"), Err: err}
		}
		cur = fd
	}
	return cur, nil
}

// linkOn names the first of segs that is a symbolic link now, or "".
func (d *Dir) linkOn(segs []string) string {
	cur := d.fd()
	defer func() {
		if cur != d.fd() {
			unix.Close(cur)
		}
	}()
	for i, s := range segs {
		var st unix.Stat_t
		if unix.Fstatat(cur, s, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return ""
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return strings.Join(segs[:i+1], "/")
		}
		fd, err := unix.Openat(cur, s, dirFlags, 0)
		if err != nil {
			return ""
		}
		if cur != d.fd() {
			unix.Close(cur)
		}
		cur = fd
	}
	return ""
}

// Lstat describes name in d, a link as a link (what os.Lstat gives,
// Sys a *syscall.Stat_t).
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	// O_PATH opens anything (a link itself, a FIFO without waiting)
	// without reading it; fstat then fills the standard FileInfo.
	fd, err := unix.Openat(d.fd(), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.err("lstat", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, d.err("lstat", name, err)
	}
	return fi, nil
}

// ReadDir lists the directory's entries (in no order).
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	fd, err := unix.Openat(d.fd(), ".", dirFlags, 0)
	if err != nil {
		return nil, d.err("open", ".", err)
	}
	f := os.NewFile(uintptr(fd), d.name)
	defer f.Close()
	return f.ReadDir(-1)
}

// Mkdir makes the directory name in d (perm, less the umask).
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Mkdirat(d.fd(), name, uint32(perm.Perm())); err != nil {
		return d.err("mkdir", name, err)
	}
	return nil
}

// Remove removes name in d, a file or a link (a link itself, never what
// it points to); a directory is left (EISDIR).
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil {
		return d.err("remove", name, err)
	}
	return nil
}

// RemoveDir removes name in d if it is an empty directory; a link is
// left (ENOTDIR).
func (d *Dir) RemoveDir(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR); err != nil {
		return d.err("rmdir", name, err)
	}
	return nil
}

// Lchown gives name in d (a link itself, not its target) to uid and gid.
func (d *Dir) Lchown(name string, uid, gid int) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Fchownat(d.fd(), name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return d.err("lchown", name, err)
	}
	return nil
}

// Chown gives the directory itself to uid and gid.
func (d *Dir) Chown(uid, gid int) error { return d.f.Chown(uid, gid) }

// Chmod sets the directory's own permissions.
func (d *Dir) Chmod(perm fs.FileMode) error { return d.f.Chmod(perm) }

// Create makes the file name in d, which must not exist (a link in its
// place is not followed), for writing, with perm less the umask.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd(), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, d.err("create", name, err)
	}
	return os.NewFile(uintptr(fd), d.name+"/"+name), nil
}

// Symlink makes name in d a symbolic link to target.
func (d *Dir) Symlink(target, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, d.fd(), name); err != nil {
		return d.err("symlink", name, err)
	}
	return nil
}

// Readlink reads the link name in d.
func (d *Dir) Readlink(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.fd(), name, buf)
		if err != nil {
			return "", d.err("readlink", name, err)
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Rename renames from to to, both in d, replacing a file (not a
// directory) at to.
func (d *Dir) Rename(from, to string) error {
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd(), from, d.fd(), to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.name + "/" + from, New: d.name + "/" + to, Err: err}
	}
	return nil
}

// Sync flushes the directory's entries (fsync).
func (d *Dir) Sync() error { return d.f.Sync() }

// SyncFS flushes the whole file system the directory is on (syncfs): what
// was written through any handle on it is on disk after.
func (d *Dir) SyncFS() error { return unix.Syncfs(d.fd()) }

// errNoOpenat2 says the kernel has no openat2 (before 5.6, or a seccomp
// filter refuses it): OpenDir walks name by name instead.
var errNoOpenat2 = errors.New("openat2 unavailable")

// noOpenat2 is set once openat2 was found missing.
var noOpenat2 atomic.Bool

// openBeneath opens the directory rel below dirfd with openat2: no
// symbolic link on the way, nothing outside dirfd. A rename racing the
// lookup makes the kernel answer EAGAIN: it is asked again.
func openBeneath(dirfd int, rel string) (int, error) {
	if noOpenat2.Load() {
		return -1, errNoOpenat2
	}
	how := unix.OpenHow{
		Flags:   dirFlags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for range 64 {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
			return -1, errNoOpenat2
		case errors.Is(err, unix.EPERM):
			// A seccomp filter's answer to a system call it does not
			// know, or a real refusal, which the walk meets too.
			return -1, errNoOpenat2
		}
		return -1, err
	}
	return -1, errNoOpenat2 // renames all the while: the walk is as safe
}
