package repo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Objects by hash, for shipping snapshots to another machine and
// receiving them: a snapshot is its commit, its trees and its blobs, each
// named by its git hash; what a receiver gets is checked against its name
// and a snapshot is named only once it is whole.

// ErrDamaged marks what was received from elsewhere and is not what it
// claims to be: an object whose content does not hash to its name, is
// larger than declared or than the store takes, or a snapshot that is not
// whole. Nothing of it is kept under its name.
var ErrDamaged = errors.New("damaged or forged")

// IncomingDir holds objects being received, outside objects/ so that
// neither GC nor a reader ever sees one half written.
const IncomingDir = "incoming"

// ReadBatch reads the objects named by ids with one `git cat-file
// --batch` and hands each to fn in order, with its type. A missing object
// is an error naming it.
func (r *Repo) ReadBatch(ctx context.Context, ids []string, fn func(id, typ string, data []byte) error) error {
	for _, id := range ids {
		if !ObjectID.MatchString(id) {
			return fmt.Errorf("snapshot store: %q is not a git object id", id)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := r.git.Run(ctx, Call{Args: []string{"cat-file", "--batch"},
			Stdin: strings.NewReader(strings.Join(ids, "\n") + "\n"), Stdout: pw})
		pw.CloseWithError(cmp(err, io.EOF))
		done <- err
	}()
	err := readBatch(bufio.NewReader(pr), ids, fn)
	if err != nil {
		cancel()
		pr.CloseWithError(err)
	}
	gitErr := <-done
	if err != nil {
		return err
	}
	if gitErr != nil {
		return fmt.Errorf("snapshot store: %w", gitErr)
	}
	return nil
}

func cmp(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

// readBatch reads `git cat-file --batch` output: per object a header
// "<id> <type> <size>\n" (or "<id> missing\n"), the content and "\n".
func readBatch(r *bufio.Reader, ids []string, fn func(id, typ string, data []byte) error) error {
	for _, want := range ids {
		head, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("snapshot store: reading object %s: %w", want, err)
		}
		f := strings.Fields(head)
		if len(f) == 2 && f[1] == "missing" {
			return fmt.Errorf("snapshot store: object %s is missing", want)
		}
		if len(f) != 3 || f[0] != want {
			return fmt.Errorf("snapshot store: cat-file said %q for object %s", strings.TrimSpace(head), want)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("snapshot store: cat-file gave a bad size for %s", want)
		}
		data := make([]byte, size+1) // and the newline
		if _, err := io.ReadFull(r, data); err != nil {
			return fmt.Errorf("snapshot store: reading object %s: %w", want, err)
		}
		if err := fn(want, f[1], data[:size]); err != nil {
			return err
		}
	}
	return nil
}

// CheckConnected refuses (ErrDamaged) a commit that does not reach every
// object it names: git gc would fail on it for ever.
func (r *Repo) CheckConnected(ctx context.Context, commit string) error {
	_, err := r.git.Run(ctx, Call{Args: []string{"rev-list", "--objects", "--quiet", "--missing=error", commit}, Stdout: io.Discard})
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("it is not whole (%w): %w", err, ErrDamaged)
}
