package transcript

import (
	"bytes"
	"errors"
	"io"

	"github.com/continuityd/continuityd/internal/safefile"
)

// DefaultMaxBytes is the read limit ReadNew uses when given maxBytes <= 0.
// A single transcript line (a large tool result, a pasted file) can run to
// megabytes; a line longer than the limit is dropped whole.
const DefaultMaxBytes = 16 << 20

// Tail reads the lines appended to a file since the last call, for a
// daemon that polls a transcript the agent keeps appending to. It holds no
// open file between calls, so a rotated or deleted file is never pinned.
//
// The zero Tail with Path set starts at the beginning of the file. To
// resume after a restart, persist Offset and Inode and set them again.
type Tail struct {
	// Path is the file to follow.
	Path string
	// Offset is where the next read starts: just past the last complete
	// line returned.
	Offset int64
	// Inode identifies the file Offset refers to: its inode number on
	// Unix, 0 elsewhere or when not yet known. A read that finds another
	// inode at Path starts over. When it is 0, the next read adopts
	// whatever file is at Path, so a replacement made while the daemon was
	// down is then noticed only if the new file is shorter than Offset.
	Inode uint64
	// Dropped counts lines longer than the read limit, skipped whole.
	Dropped int64
	// Opener opens Path at each read; nil: this process opens it
	// (safefile.Here). A daemon running as root over another user's
	// transcripts reads them as that user.
	Opener safefile.Opener

	// skipping is set while inside a dropped line, until its newline.
	skipping bool
}

// ReadNew reads the complete lines appended since Offset, at most maxBytes
// of the file per call (DefaultMaxBytes if maxBytes <= 0), and advances
// Offset past them; call it again to read on. Lines come without their
// "\n" (and without a "\r" before it); blank lines are left out. A partial
// last line is not returned: it waits, unread, for its newline.
//
// If the file is now shorter than Offset (truncated) or is another file
// (replaced, e.g. rotated by rename and create), reading starts over from
// the beginning of the file at Path and truncated is true: the lines
// returned do not continue the earlier ones. A truncation followed by
// regrowth past Offset between two calls cannot be seen.
//
// Errors are those of opening, stating and reading the file; a missing
// file is an error satisfying errors.Is(err, fs.ErrNotExist), and leaves
// the Tail as it was. Path is opened without following a final symbolic
// link and must be a regular file (a FIFO is never waited on, a device
// never read): otherwise the error is a *safefile.Error.
func (t *Tail) ReadNew(maxBytes int) (lines [][]byte, truncated bool, err error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	op := t.Opener
	if op == nil {
		op = safefile.Here
	}
	f, fi, err := op.Open(t.Path, safefile.OpenOptions{})
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if ino := fileInode(fi); ino != 0 {
		if t.Inode != 0 && ino != t.Inode {
			t.restart()
			truncated = true
		}
		t.Inode = ino
	}
	size := fi.Size()
	if size < t.Offset {
		t.restart()
		truncated = true
	}
	if size == t.Offset {
		return nil, truncated, nil
	}
	buf := make([]byte, min(size-t.Offset, int64(maxBytes)))
	n, err := f.ReadAt(buf, t.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, truncated, err
	}
	// Shorter than expected means the file shrank since Stat; the next
	// call will see it.
	buf = buf[:n]
	full := n == maxBytes

	start := 0
	if t.skipping {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			t.Offset += int64(n)
			return nil, truncated, nil
		}
		start, t.skipping = i+1, false
	}
	last := bytes.LastIndexByte(buf[start:], '\n')
	if last < 0 {
		if full && start == 0 {
			// A whole read without a newline: this line will never fit.
			// Drop it rather than stall on it forever.
			t.Dropped++
			t.skipping = true
			t.Offset += int64(n)
			return nil, truncated, nil
		}
		t.Offset += int64(start)
		return nil, truncated, nil
	}
	end := start + last + 1
	for _, l := range bytes.Split(buf[start:end-1], []byte{'\n'}) {
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		lines = append(lines, l[:len(l):len(l)])
	}
	t.Offset += int64(end)
	return lines, truncated, nil
}

// restart forgets the position in a file that is gone or shrank.
func (t *Tail) restart() {
	t.Offset = 0
	t.skipping = false
}
