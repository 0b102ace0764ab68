package place

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/safefile"
)

// Rules decide which directories a session may adopt as places: never
// one while adoption is off, / or a home itself, nothing outside the
// roots, and, for a caller who is not root, only a directory the caller
// owns (a root service adopts for many users and acts as each).
type Rules struct {
	Adopt bool
	// Roots are the roots for a user whose home is home (absolute).
	Roots func(home string) []string
	// Home is the home of the user uid ("" when unknown: roots under a
	// home then drop out).
	Home func(uid uint32) string
}

// NoPlaceError says why a session's directory is no place: it lies in
// none, and may not be adopted. Forbidden is set when only the caller
// was the problem (it does not own the directory).
type NoPlaceError struct {
	Dir       string
	Reason    string
	Forbidden bool
}

func (e *NoPlaceError) Error() string {
	return fmt.Sprintf("%s lies in no place of this daemon and is not adopted as one: %s", e.Dir, e.Reason)
}

// Where is the place a session in cwd adopts, for the user uid: the
// directory holding .git nearest above cwd (its git top-level) that is
// still inside a root and not a home, else cwd itself. The directory
// must exist, be a directory inside (or at) one of the user's roots, and
// be neither / nor a home; when uid is not root it must be uid's own.
func (r Rules) Where(cwd string, uid uint32) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", &NoPlaceError{Dir: cwd, Reason: "the directory is not an absolute path"}
	}
	if !r.Adopt {
		return "", &NoPlaceError{Dir: cwd, Reason: "adoption is off ([places] adopt = false); configure an [[agent]] for it"}
	}
	dir := Canonical(cwd)
	fi, err := os.Stat(dir)
	if err != nil {
		return "", &NoPlaceError{Dir: cwd, Reason: "it cannot be read: " + errReason(err)}
	}
	if !fi.IsDir() {
		return "", &NoPlaceError{Dir: cwd, Reason: "it is not a directory"}
	}
	home := ""
	if r.Home != nil {
		home = r.Home(uid)
	}
	var roots []string
	if r.Roots != nil {
		for _, root := range r.Roots(home) {
			roots = append(roots, Canonical(root))
		}
	}
	if home != "" {
		home = Canonical(home)
	}
	root := under(dir, roots)
	switch {
	case dir == "/":
		return "", &NoPlaceError{Dir: cwd, Reason: "/ is never a place"}
	case home != "" && dir == home:
		return "", &NoPlaceError{Dir: cwd, Reason: "a home directory itself is never a place; start the session in a project under it"}
	case root == "":
		return "", &NoPlaceError{Dir: cwd, Reason: "it is outside [places] roots (" + strings.Join(rootsShown(r, home), ", ") + ")"}
	}
	// The git top-level, as far up as the root allows and short of a
	// home (a home kept in git is no project).
	place := dir
	for d := dir; within(d, root) && d != home && d != "/"; d = filepath.Dir(d) {
		if hasGit(d) {
			place = d
			break
		}
	}
	// Where owners are known (not on Windows), a caller other than root
	// adopts only its own directories.
	if owner, ok := ownerOf(place); ok && uid != 0 && owner != uid {
		return "", &NoPlaceError{Dir: cwd, Forbidden: true,
			Reason: fmt.Sprintf("%s is uid %d's, not the caller's (uid %d): a place is adopted only by its owner", place, owner, uid)}
	}
	return place, nil
}

// rootsShown are the roots named in a refusal.
func rootsShown(r Rules, home string) []string {
	if r.Roots == nil {
		return []string{"none"}
	}
	out := r.Roots(home)
	if len(out) == 0 {
		return []string{"none for this user"}
	}
	return out
}

// under is the root of roots that holds dir (or is dir), "" when none.
func under(dir string, roots []string) string {
	for _, root := range roots {
		if within(dir, root) {
			return root
		}
	}
	return ""
}

// within reports whether dir is root or lies below it.
func within(dir, root string) bool {
	if root == "/" {
		return true
	}
	return dir == root || strings.HasPrefix(dir, root+string(filepath.Separator))
}

// hasGit reports whether dir holds .git (a repository, or a worktree's
// or submodule's .git file).
func hasGit(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil
}

// OwnerOf is the uid owning dir; ok is false where it is not known.
func OwnerOf(dir string) (uid uint32, ok bool) { return ownerOf(dir) }

// ownerOf is the uid owning dir.
func ownerOf(dir string) (uint32, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, false
	}
	uid, _, ok := safefile.Owner(fi)
	return uid, ok
}

// errReason is err without the path os puts in front of it.
func errReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
