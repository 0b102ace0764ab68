// Package beneath acts on files through directory handles opened beneath
// a directory without following any symbolic link, so that a name checked
// is the name acted on: a privileged process changing a tree that someone
// else may change at the same time (a restore as root into a user's
// workdir) is never led out of it by a directory swapped for a link
// between a check and the act.
//
// A Dir is an open directory. OpenDir opens one below it with no symbolic
// link anywhere on the way (openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS where Linux has it, else one openat with O_NOFOLLOW
// per name); a link met is an error naming it (ErrSymlink), never
// followed, even when it stays inside. Every other method takes one name
// in the directory (no "/"), acts with the *at system call on the handle
// (unlinkat, mkdirat, fchownat without following, renameat, symlinkat),
// or on the handle itself (fchmod, fchown). A directory opened stays the
// one that was opened: moved or replaced later, the handle still names
// the directory that was there.
//
// Off Unix, the same calls go through os.Root: nothing leaves the
// directory, but a link that stays inside it may be followed.
package beneath

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSymlink is what a symbolic link met on the way is (errors.Is).
var ErrSymlink = errors.New("is a symbolic link; it is not followed")

// SymlinkError is a symbolic link met where a directory was expected:
// Path is the link, relative to the Dir the call was made on.
type SymlinkError struct {
	Path string
}

func (e *SymlinkError) Error() string { return e.Path + " " + ErrSymlink.Error() }

// Is makes errors.Is(err, ErrSymlink) hold.
func (e *SymlinkError) Is(target error) bool { return target == ErrSymlink }

// checkName refuses anything but one name in a directory.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("beneath: %q is not one name in a directory", name)
	}
	return nil
}

// splitRel checks a relative path of names ("a/b/c": no "..", no ".", no
// empty name, not absolute) and returns its names.
func splitRel(rel string) ([]string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") {
		return nil, fmt.Errorf("beneath: %q is not a relative path", rel)
	}
	segs := strings.Split(rel, "/")
	for _, s := range segs {
		if err := checkName(s); err != nil {
			return nil, fmt.Errorf("beneath: %q is not a path of names below a directory", rel)
		}
	}
	return segs, nil
}
