// Package safefile opens and reads files that someone other than the
// daemon may have put in place (the spool, the agent's workdir,
// transcripts, configuration, tokens) without being led anywhere by them:
// a FIFO is never waited on, a device or a directory is never read, a
// symbolic link is followed only where the caller allows it, and a file is
// read through a size limit, so an oversized one is refused without being
// read whole.
//
// Every refusal is an *Error naming the file; errors.Is tells the reason
// apart (ErrSymlink, ErrNotRegular, ErrTooLarge, ErrOutside).
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// The reasons a file is refused.
var (
	// ErrSymlink: the file is a symbolic link where none is followed.
	ErrSymlink = errors.New("is a symbolic link")
	// ErrNotRegular: the file is a FIFO, a device, a socket or a directory.
	ErrNotRegular = errors.New("is not a regular file")
	// ErrTooLarge: the file is over the caller's size limit.
	ErrTooLarge = errors.New("is over the size limit")
	// ErrOutside: a symbolic link (or "..") leads out of the directory the
	// file must stay in.
	ErrOutside = errors.New("leads out of its directory")
	// ErrNotPrivate: a secret file others may read or that another user owns.
	ErrNotPrivate = errors.New("is not private to its owner")
	// ErrForeign: a directory the process must own is another user's.
	ErrForeign = errors.New("is owned by another user")
)

// Error is a refusal: Path is the file, Reason one of the Err values above,
// Detail what was found (never the file's content).
type Error struct {
	Path   string
	Reason error
	Detail string
}

func (e *Error) Error() string { return e.Path + " " + e.Detail }

// Unwrap makes errors.Is(err, ErrNotRegular) and the like work.
func (e *Error) Unwrap() error { return e.Reason }

// Open opens path for reading and checks that it is a regular file. A
// final symbolic link is not followed (ErrSymlink); links in the
// directories above it are, as they are the operator's. A FIFO is opened
// without waiting for a writer and refused at once.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return open(path, false)
}

// OpenFollow is Open for a file the operator named (the configuration, an
// upstream's token_file): a symbolic link is followed, as secret mounts
// and configuration managers use them, but the file it reaches must still
// be a regular one.
func OpenFollow(path string) (*os.File, fs.FileInfo, error) {
	return open(path, true)
}

func open(path string, follow bool) (*os.File, fs.FileInfo, error) {
	return Here.Open(path, OpenOptions{Follow: follow})
}

// OpenIn opens name inside root: symbolic links are followed only while
// they stay inside it (ErrOutside otherwise), and the file reached must be
// a regular one. Errors name the file as root's name joined with name.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	path := root.Name() + string(os.PathSeparator) + name
	f, err := root.OpenFile(name, openInFlags, 0)
	if err != nil {
		// os.Root does not export its error for a path leaving the root.
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent") {
			return nil, nil, &Error{Path: path, Reason: ErrOutside,
				Detail: fmt.Sprintf("leads out of %s (a symbolic link pointing outside it); it is not followed", root.Name())}
		}
		return nil, nil, err
	}
	return checkOpened(f, path)
}

// checkOpened keeps f only if it is a regular file.
func checkOpened(f *os.File, path string) (*os.File, fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &Error{Path: path, Reason: ErrNotRegular, Detail: "is " + kind(fi.Mode()) + ", not a regular file; it is not read"}
	}
	return f, fi, nil
}

// kind names a file type for people.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// ReadAll reads an opened file of at most limit bytes. A file whose size is
// already over the limit is refused without a read; one growing while read
// is cut at limit+1 bytes and refused.
func ReadAll(f *os.File, fi fs.FileInfo, path string, limit int64) ([]byte, error) {
	b, err := ReadAllInto(nil, f, fi, path, limit)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ReadAllInto is ReadAll into buf's memory (its contents are replaced),
// for a caller reading many files one after another: it returns the
// bytes read, in buf's array while they fit.
func ReadAllInto(buf []byte, f *os.File, fi fs.FileInfo, path string, limit int64) ([]byte, error) {
	if fi.Size() > limit {
		return buf[:0], tooLarge(path, fi.Size(), limit)
	}
	r := io.LimitReader(f, limit+1)
	b := slices.Grow(buf[:0], int(fi.Size())+1) // one more: EOF is seen without growing
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return b, err
		}
	}
	if int64(len(b)) > limit {
		return b, tooLarge(path, int64(len(b)), limit)
	}
	return b, nil
}

func tooLarge(path string, size, limit int64) error {
	return &Error{Path: path, Reason: ErrTooLarge, Detail: fmt.Sprintf("is %s, over the limit of %s; it is not read", human(size), human(limit))}
}

// human writes a byte count the way people read it.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads a regular file of at most limit bytes that is not a
// symbolic link (see Open).
func ReadFile(path string, limit int64) ([]byte, error) {
	return readWith(path, limit, Open)
}

// ReadFileFollow is ReadFile following symbolic links (see OpenFollow).
func ReadFileFollow(path string, limit int64) ([]byte, error) {
	return readWith(path, limit, OpenFollow)
}

func readWith(path string, limit int64, open func(string) (*os.File, fs.FileInfo, error)) ([]byte, error) {
	f, fi, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, fi, path, limit)
}

// ReadFileIn reads name inside root (see OpenIn), at most limit bytes.
func ReadFileIn(root *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := OpenIn(root, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := ReadAll(f, fi, root.Name()+string(os.PathSeparator)+name, limit)
	return b, fi, err
}

// ReadFileInNoFollow is ReadFileIn for a directory others may write in
// (the spool): name itself must not be a symbolic link (ErrSymlink), even
// one staying inside root. A link put in place between the check and the
// open is still followed only inside root, and must reach a regular file.
func ReadFileInNoFollow(root *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, &Error{Path: root.Name() + string(os.PathSeparator) + name, Reason: ErrSymlink, Detail: "is a symbolic link; it is not followed here"}
	}
	return ReadFileIn(root, name, limit)
}

// CheckOwnDir refuses what fi (from an Lstat of path) describes unless it is
// a directory, not a symbolic link, owned by this process's user: a
// directory the process creates files in where others may have put
// something in its place. On Windows the owner is not checked.
func CheckOwnDir(fi fs.FileInfo, path string) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &Error{Path: path, Reason: ErrSymlink, Detail: "is a symbolic link; it is not followed here"}
	case !fi.IsDir():
		return &Error{Path: path, Reason: ErrNotRegular, Detail: "is " + kind(fi.Mode()) + ", not a directory"}
	}
	return checkOwner(fi, path)
}

// CheckPrivate refuses a secret file (fi, opened from path) that anyone
// but its owner may read or write, or that another user than this
// process's owns. On Windows, which has no such mode bits, it checks
// nothing: there the file's ACL is the user's care.
func CheckPrivate(fi fs.FileInfo, path string) error {
	return checkPrivate(fi, path)
}
