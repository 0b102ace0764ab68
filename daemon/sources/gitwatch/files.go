package gitwatch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/internal/safefile"
)

// maxRefFile bounds a small file of the repository read whole: HEAD, a
// ref, a .git file, commondir.
const maxRefFile = 64 << 10

// files reads the repository's files through an Opener, following links
// as git does; a FIFO or a device is never read.
type files struct{ op safefile.Opener }

func (f files) read(path string) ([]byte, error) {
	return safefile.ReadFileWith(f.op, path, true, maxRefFile)
}

func (f files) open(path string) (*os.File, error) {
	file, _, err := f.op.Open(path, safefile.OpenOptions{Follow: true})
	return file, err
}

// stat is what path is (a file or a directory; anything else is an error).
func (f files) stat(path string) (fs.FileInfo, error) {
	file, fi, err := f.op.Open(path, safefile.OpenOptions{Follow: true, Dir: true})
	if err != nil {
		return nil, err
	}
	file.Close()
	return fi, nil
}

// walk calls fn with every file below the directory base (relative to
// it), directories first listed, then descended into. A base that does
// not exist has no files, and neither has a directory gone while walking.
func (f files) walk(base string, fn func(rel string) error) error {
	return f.walkDir(base, "", fn)
}

func (f files) walkDir(base, rel string, fn func(rel string) error) error {
	dir, _, err := f.op.Open(filepath.Join(base, rel), safefile.OpenOptions{Follow: rel == "", Dir: true})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(rel, e.Name())
		if e.IsDir() {
			err = f.walkDir(base, p, fn)
		} else {
			err = fn(p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
