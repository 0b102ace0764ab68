//go:build !linux

package beneath

import (
	"io/fs"
	"os"
)

// OpenRead opens name in d for reading: never through a link (name itself
// a link is an error). The caller checks that what it got is a regular
// file (Stat).
func (d *Dir) OpenRead(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fi, err := d.r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrSymlink}
	}
	return d.r.Open(name)
}
