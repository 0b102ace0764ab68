package repo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/daemonside/gitpipe"
)

// BlobStream reads blobs in order (a restore's), from one `git cat-file
// --batch`: each is handed out as a reader of its bytes, never held
// whole.
type BlobStream struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	errb   *gitpipe.Tail
	cancel context.CancelFunc
	fed    chan error        // the end of the goroutine writing the ids
	left   *io.LimitedReader // the blob handed out last, maybe not read whole
	ids    []string          // still to come, in order
}

// StreamBlobs starts the stream of ids; Close ends it.
func (r *Repo) StreamBlobs(ctx context.Context, ids []string) (*BlobStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &BlobStream{cancel: cancel, fed: make(chan error, 1), ids: ids, errb: &gitpipe.Tail{Max: 4 << 10}}
	b.cmd = r.git.Command(ctx, Call{Args: []string{"cat-file", "--batch"}})
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

// Next returns the next blob's size and a reader of its bytes; what the
// last one's reader left unread is skipped first.
func (b *BlobStream) Next() (int64, io.Reader, error) {
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
func (b *BlobStream) failed(err error) error {
	if s := strings.TrimSpace(b.errb.String()); s != "" {
		return fmt.Errorf("snapshot store: git cat-file: %w: %s", err, s)
	}
	return fmt.Errorf("snapshot store: git cat-file: %w", err)
}

// Close ends the stream: git is stopped if it still runs.
func (b *BlobStream) Close() {
	b.cancel()
	<-b.fed
	b.cmd.Wait()
}
