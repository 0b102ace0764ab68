package safefile

import (
	"io/fs"
	"os"
)

// Opener opens the files of a tree someone else owns (a workdir, a home's
// transcripts, a repository's .git) with the rights of whoever should be
// reading them. A daemon that runs as that user opens them itself (Here);
// a daemon running as root over another user's tree opens them through a
// process with that user's credentials, which hands the descriptor back,
// so a file the user could not read is never read for them.
type Opener interface {
	// Open opens path for reading as Open does, or as OpenFollow does
	// with o.Follow; with o.Dir a directory is taken too (to list it).
	Open(path string, o OpenOptions) (*os.File, fs.FileInfo, error)
	// OpenIn opens name inside the directory dir as OpenIn does: a
	// symbolic link leading out of dir is refused (ErrOutside).
	OpenIn(dir, name string) (*os.File, fs.FileInfo, error)
}

// OpenOptions say what an Opener's Open takes.
type OpenOptions struct {
	Follow bool // a final symbolic link is followed
	Dir    bool // a directory is taken as well as a regular file
}

// Here opens with this process's own rights.
var Here Opener = here{}

type here struct{}

func (here) Open(path string, o OpenOptions) (*os.File, fs.FileInfo, error) {
	f, err := openNoWait(path, o.Follow)
	if err != nil {
		if !o.Follow {
			// O_NOFOLLOW fails differently per system (ELOOP, EMLINK,
			// EFTYPE): ask the name itself.
			if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, &Error{Path: path, Reason: ErrSymlink, Detail: "is a symbolic link; it is not followed here"}
			}
		}
		return nil, nil, err
	}
	return Adopt(f, path, o.Dir)
}

func (here) OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	return OpenIn(root, name)
}

// Adopt keeps f, opened as path, only if it is a regular file (or, with
// dir, a directory): the check an Opener makes of every file it returns,
// and of a descriptor another process handed over.
func Adopt(f *os.File, path string, dir bool) (*os.File, fs.FileInfo, error) {
	if !dir {
		return checkOpened(f, path)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, nil, &Error{Path: path, Reason: ErrNotRegular, Detail: "is " + kind(fi.Mode()) + ", neither a regular file nor a directory; it is not read"}
	}
	return f, fi, nil
}

// ReadFileWith reads path through op, as ReadFile does (or
// ReadFileFollow, with follow).
func ReadFileWith(op Opener, path string, follow bool, limit int64) ([]byte, error) {
	f, fi, err := op.Open(path, OpenOptions{Follow: follow})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, fi, path, limit)
}

// ReadFileInWith reads name inside dir through op, as ReadFileIn does.
func ReadFileInWith(op Opener, dir, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := op.OpenIn(dir, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := ReadAll(f, fi, dir+string(os.PathSeparator)+name, limit)
	return b, fi, err
}
