package repo

import (
	"bufio"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The private index of a first snapshot, written in process.
//
// After a first snapshot, the next full add (`git add -A`) must find
// every file's stat data in the index, or it reads and hashes every file
// again. A first snapshot writes the index git add would have written:
// git's index version 2, one entry per file, sorted by path (bytewise):
//
//	"DIRC" | version 2 | entry count        (32-bit big-endian words)
//	per entry: ctime s, ns | mtime s, ns | dev | ino | mode | uid | gid |
//	           size (each 32 bits, truncated as git does) | 20-byte id |
//	           16-bit flags (the path's length, at most 0xfff) | path |
//	           1 to 8 NULs (the entry's length a multiple of 8)
//	SHA-1 of everything before it
//
// The stat data is the file's as it was opened, before it was read: a
// file that changed while or after it was read no longer matches, and
// git reads it again. That is how git itself fills an entry.
//
// The entries go straight to the lock file git's own writers use
// (index.lock, created exclusively, so a git holding the index fails it),
// which is renamed over the index once the count and the checksum are
// written: memory stays flat however many files there are.

// IndexStat is the stat data of an index entry.
type IndexStat struct {
	ctimeS, ctimeNS, mtimeS, mtimeNS uint32
	dev, ino, uid, gid, size         uint32
}

// IndexWriter writes a new index, entry by entry, in path order.
type IndexWriter struct {
	path string // the index; the entries go to path.lock
	f    *os.File
	w    *bufio.Writer
	n    uint32
	last string
}

// NewIndexWriter starts the index at path.
func NewIndexWriter(path string) (*IndexWriter, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: locking the index: %w", err)
	}
	w := &IndexWriter{path: path, f: f, w: bufio.NewWriterSize(f, 64<<10)}
	w.w.Write([]byte{'D', 'I', 'R', 'C', 0, 0, 0, 2, 0, 0, 0, 0}) // the count comes at the end
	return w, nil
}

// Add writes the entry of path (after every path added before it).
func (w *IndexWriter) Add(path string, mode uint32, id OID, st IndexStat) error {
	if w.n > 0 && path <= w.last {
		return fmt.Errorf("snapshot store: index entries out of order: %q after %q", path, w.last)
	}
	w.last = path
	w.n++
	var e [62]byte
	for i, v := range [...]uint32{st.ctimeS, st.ctimeNS, st.mtimeS, st.mtimeNS, st.dev, st.ino, mode, st.uid, st.gid, st.size} {
		binary.BigEndian.PutUint32(e[4*i:], v)
	}
	copy(e[40:60], id[:])
	binary.BigEndian.PutUint16(e[60:], uint16(min(len(path), 0xfff)))
	w.w.Write(e[:])
	w.w.WriteString(path)
	var pad [8]byte
	_, err := w.w.Write(pad[:8-(62+len(path))%8]) // at least one NUL
	return err
}

// Finish writes the count and the checksum and puts the index in place.
func (w *IndexWriter) Finish() error {
	err := w.w.Flush()
	if err == nil {
		var count [4]byte
		binary.BigEndian.PutUint32(count[:], w.n)
		_, err = w.f.WriteAt(count[:], 8)
	}
	var end int64
	if err == nil {
		end, err = w.f.Seek(0, io.SeekEnd)
	}
	sum := sha1.New()
	if err == nil {
		_, err = io.Copy(sum, io.NewSectionReader(w.f, 0, end))
	}
	if err == nil {
		_, err = w.f.Write(sum.Sum(nil))
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.path)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("snapshot store: writing the index: %w", err), os.Remove(w.f.Name()))
	}
	w.f = nil
	return nil
}

// Abort removes an unfinished index.
func (w *IndexWriter) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// IndexEntries is how many entries the index at path holds (its header
// says), 0 when there is none.
func IndexEntries(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var head [12]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || string(head[:4]) != "DIRC" {
		return 0
	}
	return int(binary.BigEndian.Uint32(head[8:]))
}
