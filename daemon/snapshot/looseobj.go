package snapshot

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

	"github.com/continuityd/continuityd/internal/gitpipe"
)

// Objects written and read in process, for a Take from what changed.
//
// A git run costs a process start (several milliseconds of CPU on a slow
// machine) and a read of the whole private index (10 MB at 100,000
// files), so a burst of five edits that ran six of them cost more than
// `git add -A && git commit` itself. A Take from what changed therefore
// writes its few objects itself: its blobs, trees and commit go into one
// pack of the Take (takePack, in git's pack format: packwrite.go), put in
// place before its ref, rather than a loose object file each (a file
// created, often with its objects/xx directory, then renamed: most of a
// burst's CPU when it wrote loose objects). It makes its ref the way
// update-ref does (a lock file created exclusively, fsynced, renamed).
// What it reads (trees on the changed paths, the old side of a changed
// file for its line counts) it reads from a loose object (what a full
// add wrote), or else from one long-lived `git cat-file --batch` (packed
// objects), which finds a pack put in place after it started. The
// collector's repack merges these packs (gcEvery). Tests check every
// object against git's own (hash-object, commit-tree, ls-tree) and the
// whole result against a full `git add -A`.

// The points where a Take changes the store in process, in order: its
// blobs added to its pack (a Take from what changed), its trees, its
// commit written (the pack put in place, or a full add's loose commit),
// its ref's lock file. A kill at any of them leaves no snapshot listed
// (TestSIGKILLDuringSnapshot).
const (
	pointBlobs     = "blobs-written"
	pointTrees     = "trees-written"
	pointCommit    = "commit-written"
	pointRefLocked = "ref-locked"

	// A first snapshot's (first.go): its objects written to a
	// temporary pack, and the pack put in place (its index not yet).
	pointFirstObjects = "first-objects-written"
	pointFirstPacked  = "first-packed"
)

// takePack holds what a Take from what changed writes until its commit:
// the pack (started at the first object) and the trees written into it,
// which the Take may read again (modeLinesChanged) before they are in
// the store. indexBehind is the store's before the Take, put back if its
// pack is dropped: the index must never be synced to a tree not stored.
type takePack struct {
	w           *packWriter
	trees       map[oid][]treeEntry
	indexBehind string
}

// beginTakePack starts collecting a Take's objects (writeObject).
func (s *Store) beginTakePack() {
	s.dropTakePack()
	s.pack = &takePack{trees: map[oid][]treeEntry{}, indexBehind: s.indexBehind}
}

// writeObject stores a new object of a Take: into the Take's pack when
// one is being collected, else loose.
func (s *Store) writeObject(typ string, data []byte) (oid, error) {
	if s.pack == nil {
		return s.writeLoose(typ, data)
	}
	if s.pack.w == nil {
		w, err := newPackWriter(s.opt.Dir, 32, 32<<10, s.zw)
		if err != nil {
			return oid{}, err
		}
		s.pack.w, s.zw = w, w.compressors()
	}
	return s.pack.w.add(typ, data)
}

// finishTakePack puts the Take's pack in place (when it wrote any
// object); the collecting ends.
func (s *Store) finishTakePack() error {
	p := s.pack
	s.pack = nil
	if p == nil || p.w == nil {
		return nil
	}
	if err := p.w.finish(); err != nil {
		p.w.abort()
		s.indexBehind = p.indexBehind
		return err
	}
	return nil
}

// dropTakePack drops the objects of a Take that made no snapshot (it
// failed, fell back to a full add, or found nothing new).
func (s *Store) dropTakePack() {
	p := s.pack
	s.pack = nil
	if p == nil {
		return
	}
	if p.w != nil {
		p.w.abort()
	}
	s.indexBehind = p.indexBehind
}

// reach runs the test hook at point p.
func (s *Store) reach(p string) {
	if s.pointHook != nil {
		s.pointHook(p)
	}
}

// oid is a git object id (SHA-1).
type oid [20]byte

func (o oid) String() string { return hex.EncodeToString(o[:]) }

func parseOID(s string) (oid, bool) {
	var o oid
	if len(s) != 40 {
		return o, false
	}
	if _, err := hex.Decode(o[:], []byte(s)); err != nil {
		return o, false
	}
	return o, true
}

// hashObject is the id git gives an object of type typ holding data.
func hashObject(typ string, data []byte) oid {
	h := sha1.New()
	h.Write(objectHeader(typ, len(data)))
	h.Write(data)
	var o oid
	h.Sum(o[:0])
	return o
}

// objectHeader is what precedes an object's content in its hash and its
// loose file: "<type> <size>\0".
func objectHeader(typ string, n int) []byte {
	return append(strconv.AppendInt([]byte(typ+" "), int64(n), 10), 0)
}

// objectPath is where git keeps object o loose.
func (s *Store) objectPath(o oid) string {
	h := o.String()
	return filepath.Join(s.opt.Dir, "objects", h[:2], h[2:])
}

// writeLoose stores data as a loose object of type typ and returns its
// id. An object that exists already is written again: the rename gives it
// a fresh time, so a collector pruning unreachable objects at that moment
// keeps it (git freshens an object it finds the same way). Loose objects
// are not fsynced, as git does not by default (see Crashes in doc.go).
func (s *Store) writeLoose(typ string, data []byte) (oid, error) {
	o := hashObject(typ, data)
	final := s.objectPath(o)
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
	zw := s.zw.deflate
	if zw == nil {
		zw, _ = zlib.NewWriterLevel(f, zlib.BestSpeed) // git's core.looseCompression
		s.zw.deflate = zw
	} else {
		zw.Reset(f)
	}
	zw.Write(objectHeader(typ, len(data)))
	zw.Write(data)
	err = zw.Close()
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

// readLoose reads object o when it is loose; ok is false when it is not
// (packed by the collector, or missing). What it reads is checked against
// its name before it is believed.
func (s *Store) readLoose(o oid) (typ string, data []byte, ok bool, err error) {
	f, err := os.Open(s.objectPath(o))
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
	raw, err := io.ReadAll(io.LimitReader(zr, maxObjectBytes+64))
	if err != nil {
		return "", nil, false, fmt.Errorf("snapshot store: object %s is damaged: %w", o, err)
	}
	head, body, found := bytes.Cut(raw, []byte{0})
	t, n, _ := strings.Cut(string(head), " ")
	size, perr := strconv.Atoi(n)
	if !found || perr != nil || size != len(body) || hashObject(t, body) != o {
		return "", nil, false, fmt.Errorf("snapshot store: object %s is damaged (its content does not match its name)", o)
	}
	return t, body, true, nil
}

// maxObjectBytes bounds an object read in process: a blob is at most the
// snapshot size limit (8 MiB by default); a larger one is read by git.
const maxObjectBytes = 64 << 20

// treeEntry is one entry of a git tree object.
type treeEntry struct {
	name string
	mode uint32 // 0o40000 tree, 0o100644, 0o100755, 0o120000 link, 0o160000 gitlink
	id   oid
}

const (
	modeTree    = 0o40000
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeLink    = 0o120000
	modeGitlink = 0o160000
)

func (e treeEntry) isTree() bool { return e.mode == modeTree }

// parseTree reads a tree object: "<octal mode> <name>\0<20-byte id>"...
func parseTree(data []byte) ([]treeEntry, error) {
	var out []treeEntry
	err := gitpipe.EachTreeEntry(data, len(oid{}), func(mode uint32, name, id []byte) {
		e := treeEntry{name: string(name), mode: mode}
		copy(e.id[:], id)
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodeTree writes entries as a tree object, in git's order: by name,
// a tree's name compared as if it ended in "/".
func encodeTree(entries []treeEntry) []byte {
	slices.SortFunc(entries, compareTreeEntries)
	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString(strconv.FormatUint(uint64(e.mode), 8))
		b.WriteByte(' ')
		b.WriteString(e.name)
		b.WriteByte(0)
		b.Write(e.id[:])
	}
	return b.Bytes()
}

func compareTreeEntries(a, b treeEntry) int {
	an, bn := a.name, b.name
	if a.isTree() {
		an += "/"
	}
	if b.isTree() {
		bn += "/"
	}
	return strings.Compare(an, bn)
}

// commitObject is the commit `git commit-tree` makes of tree with msg
// (read from stdin, kept as it is) at unix time t, by the store's
// identity (isolatedEnv), with no parent.
func commitObject(tree string, t int64, msg string) []byte {
	ident := fmt.Sprintf("continuityd <continuityd@localhost> %d +0000", t)
	return []byte("tree " + tree + "\nauthor " + ident + "\ncommitter " + ident + "\n\n" + msg)
}

// createRef makes ref name point at id as `git update-ref name id ""`
// does: refused when the ref exists (loose or packed); a lock file made
// exclusively, fsynced and renamed into place, the directory fsynced.
func (s *Store) createRef(name string, id oid) error {
	p := filepath.Join(s.opt.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("snapshot store: %s exists already", name)
	}
	if packed, err := os.ReadFile(filepath.Join(s.opt.Dir, "packed-refs")); err == nil && bytes.Contains(packed, []byte(" "+name+"\n")) {
		return fmt.Errorf("snapshot store: %s exists already (packed)", name)
	}
	lock := p + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("snapshot store: locking %s: %w", name, err)
	}
	_, err = f.WriteString(id.String() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	s.reach(pointRefLocked)
	if err == nil {
		err = os.Rename(lock, p)
	}
	if err != nil {
		os.Remove(lock)
		return fmt.Errorf("snapshot store: writing %s: %w", name, err)
	}
	if d, err := os.Open(filepath.Dir(p)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
