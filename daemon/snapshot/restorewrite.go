package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/gitpipe"
)

// A restore writes each file itself (git checkout-index writes by path,
// and a directory swapped for a link under it leads it anywhere): the
// blob, read from one `git cat-file --batch`, goes into a new file made
// in the directory's handle (workTree), which gets its permissions and,
// as root, its owner through its own descriptor, and is then renamed over
// the name in the same handle. A link is made the same way.

// blobStream reads the blobs of a restore, in order, from one `git
// cat-file --batch`: each is handed out as a reader of its bytes, never
// held whole.
type blobStream struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	errb   *gitpipe.Tail
	cancel context.CancelFunc
	fed    chan error        // the end of the goroutine writing the ids
	left   *io.LimitedReader // the blob handed out last, maybe not read whole
	ids    []string          // still to come, in order
}

// streamBlobs starts the stream of ids.
func (s *Store) streamBlobs(ctx context.Context, ids []string) (*blobStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &blobStream{cancel: cancel, fed: make(chan error, 1), ids: ids, errb: &gitpipe.Tail{Max: 4 << 10}}
	b.cmd = s.git.Command(ctx, repo.Call{Args: []string{"cat-file", "--batch"}})
	b.cmd.Stderr = b.errb
	in, err := b.cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	b.out = bufio.NewReaderSize(out, 64<<10)
	go func() {
		// git answers as it reads: the names go in from here while the
		// answers are read, so neither side waits on a full pipe.
		_, err := io.Copy(in, strings.NewReader(strings.Join(ids, "\n")+"\n"))
		in.Close()
		b.fed <- err
	}()
	return b, nil
}

// next returns the next blob's size and a reader of its bytes; what the
// last one's reader left unread is skipped first.
func (b *blobStream) next() (int64, io.Reader, error) {
	if b.left != nil {
		if _, err := io.Copy(io.Discard, b.left); err != nil {
			return 0, nil, b.failed(err)
		}
		if _, err := b.out.Discard(1); err != nil { // the newline after it
			return 0, nil, b.failed(err)
		}
		b.left = nil
	}
	if len(b.ids) == 0 {
		return 0, nil, errors.New("snapshot store: no more blobs to read")
	}
	want := b.ids[0]
	b.ids = b.ids[1:]
	head, err := b.out.ReadString('\n')
	if err != nil {
		return 0, nil, b.failed(fmt.Errorf("reading object %s: %w", want, err))
	}
	f := strings.Fields(head)
	if len(f) != 3 || f[0] != want || f[1] != "blob" {
		return 0, nil, fmt.Errorf("snapshot store: cat-file said %q for blob %s", strings.TrimSpace(head), want)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return 0, nil, fmt.Errorf("snapshot store: cat-file gave a bad size for %s", want)
	}
	b.left = &io.LimitedReader{R: b.out, N: size}
	return size, b.left, nil
}

// failed adds what git said to a read that failed.
func (b *blobStream) failed(err error) error {
	if s := strings.TrimSpace(b.errb.String()); s != "" {
		return fmt.Errorf("snapshot store: git cat-file: %w: %s", err, s)
	}
	return fmt.Errorf("snapshot store: git cat-file: %w", err)
}

// close ends the stream: git is stopped if it still runs.
func (b *blobStream) close() {
	b.cancel()
	<-b.fed
	b.cmd.Wait()
}

// writeFile writes file c.path (a file or a link, as c.newMode says) from
// the next blob of blobs, under tmp first, then renamed into place: as
// root owned by want, with the permissions git gives (0666 or 0777 less
// the umask), or fewer when the snapshot recorded them (modes). A link met
// on the way, or a directory in the file's place, is an *errRefused.
func (w *workTree) writeFile(c change, tmp string, blobs *blobStream, want owner, modes map[string]fs.FileMode) error {
	parent, name, _ := cutLast(c.path)
	_, data, err := blobs.next()
	if err != nil {
		return err
	}
	d, err := w.mkdirs(parent, modes)
	if err != nil {
		return refusedBy(c.path, "the file was not written", err)
	}
	if c.newMode == "120000" {
		target, err := io.ReadAll(io.LimitReader(data, maxLinkTarget+1))
		if err != nil {
			return err
		}
		if len(target) > maxLinkTarget {
			return fmt.Errorf("the link %s holds a target over %d bytes", c.path, maxLinkTarget)
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
		if c.newMode == "100755" {
			perm = 0o777
		}
		perm &^= w.umask
		if m, ok := modes[c.path]; ok {
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
		return refusedBy(c.path, "the file was not written", err)
	}
	return nil
}

// maxLinkTarget bounds a link's target (Linux's PATH_MAX).
const maxLinkTarget = 4096
