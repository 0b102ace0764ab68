// Package gitpipe keeps a git process running and talks to it over its
// stdin and stdout (`git cat-file --batch`, `git check-ignore --stdin`).
// Starting a git process costs more CPU than most of its answers (about
// 6 ms for `git rev-parse HEAD` on the project's machine, against a tenth
// of a millisecond for the same question asked of a running `cat-file`),
// so a caller that asks often keeps one. It also reads the answers of
// `git cat-file --batch`, whoever asked.
//
// A Pipe has one owner, which serialises its use and stops it; nothing
// here starts a goroutine.
package gitpipe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pipe is one running git process.
type Pipe struct {
	cmd     *exec.Cmd
	In      io.WriteCloser // the process's stdin
	Out     *bufio.Reader  // the process's stdout
	Started time.Time
	stderr  Tail
}

// Start starts cmd, made but not started, with pipes for its stdin and
// stdout; the last 4 KiB of its stderr are kept for Failed.
func Start(cmd *exec.Cmd) (*Pipe, error) {
	p := &Pipe{}
	p.stderr.Max = 4 << 10
	cmd.Stderr = &p.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.cmd, p.In, p.Out, p.Started = cmd, in, bufio.NewReaderSize(out, 64<<10), time.Now()
	return p, nil
}

// Kill ends the process at once; a read or write in progress returns. It
// is what a caller's context ending does (context.AfterFunc).
func (p *Pipe) Kill() { p.cmd.Process.Kill() }

// Stop ends the process and waits for it.
func (p *Pipe) Stop() {
	p.In.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// Failed stops a process that answered wrongly or not at all and returns
// err with what git said on stderr, if anything.
func (p *Pipe) Failed(what string, err error) error {
	p.Stop()
	if msg := strings.TrimSpace(p.stderr.String()); msg != "" {
		return fmt.Errorf("%s: %w: git said %s", what, err, msg)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Stderr is what the process said on stderr (its last 4 KiB).
func (p *Pipe) Stderr() string { return p.stderr.String() }

// Object is cat-file --batch's answer to one name.
type Object struct {
	ID   string // the object's id, in hex
	Type string // "blob", "tree", "commit" or "tag"
	Data []byte // its content
}

// ErrMissing is the answer for a name that names no object (git says
// "missing", or "ambiguous" for a short id); the pipe stays in step.
var ErrMissing = errors.New("no such object")

// ErrTooLarge is the answer for an object over the caller's limit; its
// content was read past, so the pipe stays in step.
var ErrTooLarge = errors.New("object too large")

// ReadObject reads cat-file --batch's answer to one name: a header
// "<id> <type> <size>", the content and a newline; or "<name> missing".
// An object larger than limit bytes is skipped (ErrTooLarge). Any other
// error leaves the pipe out of step: stop it.
func ReadObject(r *bufio.Reader, limit int) (Object, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return Object{}, err
	}
	head = strings.TrimSuffix(head, "\n")
	// The name asked may hold spaces ("<commit>:./a dir"): the answer
	// for one that names nothing is told by its last word.
	if strings.HasSuffix(head, " missing") || strings.HasSuffix(head, " ambiguous") {
		return Object{}, ErrMissing
	}
	f := strings.Fields(head)
	if len(f) != 3 {
		return Object{}, fmt.Errorf("cat-file said %q", head)
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 {
		return Object{}, fmt.Errorf("cat-file gave the size %q", f[2])
	}
	if size > limit {
		if _, err := r.Discard(size + 1); err != nil {
			return Object{}, err
		}
		return Object{}, fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, f[0], size, limit)
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(r, data); err != nil {
		return Object{}, err
	}
	if data[size] != '\n' {
		return Object{}, fmt.Errorf("cat-file's answer for %s does not end where its size says", f[0])
	}
	return Object{ID: f[0], Type: f[1], Data: data[:size]}, nil
}

// Tail keeps the last Max bytes written to it: git puts the reason for a
// failure last. It is safe for concurrent use (exec's copying goroutine
// writes while a caller reads).
type Tail struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (b *Tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.Max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.Max:]...)
	}
	return len(p), nil
}

func (b *Tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.Clone(b.buf))
}

// EachTreeEntry walks a tree object's entries, "<octal mode> <name>\0<id>"
// each, the id idLen bytes (20 for SHA-1, 32 for SHA-256), in their order;
// an error when data is not a tree of that hash.
func EachTreeEntry(data []byte, idLen int, fn func(mode uint32, name, id []byte)) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || nul+1+idLen > len(data) {
			return errors.New("a tree object does not parse")
		}
		m, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return errors.New("a tree object does not parse")
		}
		fn(uint32(m), data[sp+1:nul], data[nul+1:nul+1+idLen])
		data = data[nul+1+idLen:]
	}
	return nil
}
