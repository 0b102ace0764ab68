package restore

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// A restore writes each file itself (git checkout-index writes by path,
// and a directory swapped for a link under it leads it anywhere): the
// blob, read from one `git cat-file --batch`, goes into a new file made
// in the directory's handle (workTree), which gets its permissions and,
// as root, its owner through its own descriptor, and is then renamed over
// the name in the same handle. A link is made the same way.

// writeFile writes file c.Path (a file or a link, as c.NewMode says) from
// the next blob of blobs, under tmp first, then renamed into place: as
// root owned by want, with the permissions git gives (0666 or 0777 less
// the umask), or fewer when the snapshot recorded them (modes). A link met
// on the way, or a directory in the file's place, is an *errRefused.
func (w *workTree) writeFile(c repo.Change, tmp string, blobs *repo.BlobStream, want owner, modes map[string]fs.FileMode) error {
	parent, name, _ := repo.CutLast(c.Path)
	_, data, err := blobs.Next()
	if err != nil {
		return err
	}
	d, err := w.mkdirs(parent, modes)
	if err != nil {
		return refusedBy(c.Path, "the file was not written", err)
	}
	if c.NewMode == "120000" {
		target, err := io.ReadAll(io.LimitReader(data, maxLinkTarget+1))
		if err != nil {
			return err
		}
		if len(target) > maxLinkTarget {
			return fmt.Errorf("the link %s holds a target over %d bytes", c.Path, maxLinkTarget)
		}
		if err := d.Symlink(string(target), tmp); err != nil {
			return err
		}
		if w.asRoot {
			if err := d.Lchown(tmp, want.uid, want.gid); err != nil {
				d.Remove(tmp)
				return err
			}
		}
	} else {
		perm := fs.FileMode(0o666)
		if c.NewMode == "100755" {
			perm = 0o777
		}
		perm &^= w.umask
		if m, ok := modes[c.Path]; ok {
			perm &= m
		}
		f, err := d.Create(tmp, perm) // never more open than it will be
		if err != nil {
			return err
		}
		_, err = io.Copy(f, data)
		if err == nil && w.asRoot {
			err = f.Chown(want.uid, want.gid)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			d.Remove(tmp)
			return err
		}
	}
	if err := d.Rename(tmp, name); err != nil {
		d.Remove(tmp)
		return refusedBy(c.Path, "the file was not written", err)
	}
	return nil
}

// maxLinkTarget bounds a link's target (Linux's PATH_MAX).
const maxLinkTarget = 4096
