package repo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/daemonside/gitpipe"
)

// Objects in git's format, written and read in process: a git run costs a
// process start and a read of the whole private index, more than the few
// objects a Take from what changed writes. Tests check every object
// against git's own (hash-object, mktree, commit-tree).

// OID is a git object id (SHA-1).
type OID [20]byte

func (o OID) String() string { return hex.EncodeToString(o[:]) }

// ParseOID reads an object id written in hexadecimal.
func ParseOID(s string) (OID, bool) {
	var o OID
	if len(s) != 40 {
		return o, false
	}
	if _, err := hex.Decode(o[:], []byte(s)); err != nil {
		return o, false
	}
	return o, true
}

// HashObject is the id git gives an object of type typ holding data.
func HashObject(typ string, data []byte) OID {
	h := sha1.New()
	h.Write(objectHeader(typ, len(data)))
	h.Write(data)
	var o OID
	h.Sum(o[:0])
	return o
}

// objectHeader is what precedes an object's content in its hash and its
// loose file: "<type> <size>\0".
func objectHeader(typ string, n int) []byte {
	return append(strconv.AppendInt([]byte(typ+" "), int64(n), 10), 0)
}

// ObjectPath is where git keeps object o loose.
func (r *Repo) ObjectPath(o OID) string {
	h := o.String()
	return filepath.Join(r.dir, "objects", h[:2], h[2:])
}

// WriteLoose stores data as a loose object of type typ and returns its
// id, compressed with zw's deflater (made there when it has none). An object that exists already is written again: the rename gives it
// a fresh time, so a collector pruning unreachable objects at that moment
// keeps it (git freshens an object it finds the same way). Loose objects
// are not fsynced, as git does not by default (see Crashes in doc.go).
func (r *Repo) WriteLoose(typ string, data []byte, zw *Compressors) (OID, error) {
	o := HashObject(typ, data)
	final := r.ObjectPath(o)
	dir := filepath.Dir(final)
	f, err := os.CreateTemp(dir, "tmp_obj_")
	// The collector's prune removes an object directory it emptied: make
	// it again (a prune walking the directories may take it more than
	// once).
	for try := 0; errors.Is(err, fs.ErrNotExist) && try < 5; try++ {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.CreateTemp(dir, "tmp_obj_")
		}
	}
	if err != nil {
		return o, fmt.Errorf("snapshot store: writing an object: %w", err)
	}
	z := zw.deflate
	if z == nil {
		z, _ = zlib.NewWriterLevel(f, zlib.BestSpeed) // git's core.looseCompression
		zw.deflate = z
	} else {
		z.Reset(f)
	}
	z.Write(objectHeader(typ, len(data)))
	z.Write(data)
	err = z.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
		return o, fmt.Errorf("snapshot store: writing object %s: %w", o, err)
	}
	return o, nil
}

// ReadLoose reads object o when it is loose; ok is false when it is not
// (packed by the collector, or missing). What it reads is checked against
// its name before it is believed.
func (r *Repo) ReadLoose(o OID) (typ string, data []byte, ok bool, err error) {
	f, err := os.Open(r.ObjectPath(o))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("snapshot store: reading object %s: %w", o, err)
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return "", nil, false, fmt.Errorf("snapshot store: object %s is damaged: %w", o, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxObjectBytes+64))
	if err != nil {
		return "", nil, false, fmt.Errorf("snapshot store: object %s is damaged: %w", o, err)
	}
	head, body, found := bytes.Cut(raw, []byte{0})
	t, n, _ := strings.Cut(string(head), " ")
	size, perr := strconv.Atoi(n)
	if !found || perr != nil || size != len(body) || HashObject(t, body) != o {
		return "", nil, false, fmt.Errorf("snapshot store: object %s is damaged (its content does not match its name)", o)
	}
	return t, body, true, nil
}

// MaxObjectBytes bounds an object read in process: a blob is at most the
// snapshot size limit (8 MiB by default); a larger one is read by git.
const MaxObjectBytes = 64 << 20

// TreeEntry is one entry of a git tree object.
type TreeEntry struct {
	Name string
	Mode uint32 // 0o40000 tree, 0o100644, 0o100755, 0o120000 link, 0o160000 gitlink
	ID   OID
}

// The modes of tree entries.
const (
	ModeTree    = 0o40000
	ModeFile    = 0o100644
	ModeExec    = 0o100755
	ModeLink    = 0o120000
	ModeGitlink = 0o160000
)

// IsTree reports whether the entry is a directory.
func (e TreeEntry) IsTree() bool { return e.Mode == ModeTree }

// ParseTree reads a tree object: "<octal mode> <name>\0<20-byte id>"...
func ParseTree(data []byte) ([]TreeEntry, error) {
	var out []TreeEntry
	err := gitpipe.EachTreeEntry(data, len(OID{}), func(mode uint32, name, id []byte) {
		e := TreeEntry{Name: string(name), Mode: mode}
		copy(e.ID[:], id)
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeTree writes entries as a tree object, in git's order: by name,
// a tree's name compared as if it ended in "/".
func EncodeTree(entries []TreeEntry) []byte {
	slices.SortFunc(entries, compareTreeEntries)
	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString(strconv.FormatUint(uint64(e.Mode), 8))
		b.WriteByte(' ')
		b.WriteString(e.Name)
		b.WriteByte(0)
		b.Write(e.ID[:])
	}
	return b.Bytes()
}

func compareTreeEntries(a, b TreeEntry) int {
	an, bn := a.Name, b.Name
	if a.IsTree() {
		an += "/"
	}
	if b.IsTree() {
		bn += "/"
	}
	return strings.Compare(an, bn)
}

// CommitObject is the commit `git commit-tree` makes of tree with msg
// (read from stdin, kept as it is) at unix time t, by the store's
// identity (isolatedEnv), with no parent.
func CommitObject(tree string, t int64, msg string) []byte {
	ident := fmt.Sprintf("continuityd <continuityd@localhost> %d +0000", t)
	return []byte("tree " + tree + "\nauthor " + ident + "\ncommitter " + ident + "\n\n" + msg)
}
