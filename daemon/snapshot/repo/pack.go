package repo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// A pack of new objects, written in process, for a first snapshot and
// for a Take from what changed: one file instead of a loose object file
// each.
//
// The format is git's pack version 2 with whole objects only (no deltas;
// the collector's repack finds them later):
//
//	"PACK" | version 2 | object count     (three 32-bit big-endian words)
//	per object: type and size             (first byte: continuation bit,
//	                                       3 bits of type, the size's low
//	                                       4 bits; then 7 bits a byte)
//	            zlib of the content
//	SHA-1 of everything before it
//
// and its index, version 2, which is what makes the pack visible to git:
//
//	"\377tOc" | version 2
//	fan-out: 256 counts of the ids whose first byte is at most i
//	the ids, sorted | the CRC-32 of each object's bytes in the pack
//	each object's offset (31 bits; past 2 GiB, an index into 64-bit offsets)
//	the pack's SHA-1 | SHA-1 of everything before it
//
// Both are written under temporary names git's own writers use (tmp_*,
// which the collector removes as leftovers), fsynced as git fsyncs its
// packs, and renamed into place pack first, index last.

// PackWriter writes one pack of new objects.
type PackWriter struct {
	dir string // objects/pack
	f   *os.File
	out *countingWriter
	zw  *zlib.Writer // blobs and commits: deflated, at git's loose-object level
	// stored writes trees: they are mostly object ids, which do not
	// compress (a stored tree of source files is about half again as big
	// as a deflated one), and storing one costs a fortieth of deflating it.
	stored *zlib.Writer
	objs   []packedObject
	seen   map[OID]bool
}

// packedObject is where the pack holds an object.
type packedObject struct {
	id  OID
	off int64
	crc uint32
}

// countingWriter counts and checksums what it passes on.
type countingWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.crc.Write(p)
	c.n += int64(len(p))
	return c.w.Write(p)
}

// packType is an object type's code in a pack (a first snapshot writes
// trees and blobs).
func packType(typ string) byte {
	switch typ {
	case "commit":
		return 1
	case "tree":
		return 2
	}
	return 3 // blob
}

// NewPackWriter starts a pack in the store's objects/pack, for about
// objects objects, buffering bufSize bytes; zw, when not nil, are the
// zlib writers to reuse (a compressor is about a megabyte to allocate,
// more than a small pack's whole work).
func NewPackWriter(store string, objects, bufSize int, zw Compressors) (*PackWriter, error) {
	dir := filepath.Join(store, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, fmt.Errorf("snapshot store: starting a pack: %w", err)
	}
	p := &PackWriter{dir: dir, f: f, seen: make(map[OID]bool, objects), objs: make([]packedObject, 0, objects),
		out: &countingWriter{w: bufio.NewWriterSize(f, bufSize), crc: crc32.NewIEEE()}, zw: zw.deflate, stored: zw.store}
	if p.zw == nil {
		p.zw, _ = zlib.NewWriterLevel(p.out, zlib.BestSpeed) // git's core.looseCompression
	}
	if p.stored == nil {
		p.stored, _ = zlib.NewWriterLevel(p.out, zlib.NoCompression)
	}
	// The count is not known yet: finish writes it over the zero.
	if _, err := p.out.Write([]byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0}); err != nil {
		p.Abort()
		return nil, fmt.Errorf("snapshot store: writing a pack: %w", err)
	}
	return p, nil
}

// ErrPackWrite marks a failure to write the pack (not a file's).
var ErrPackWrite = errors.New("writing a pack")

// Add writes an object of type typ holding data (once: an id written
// before is not written again) and returns its id.
func (p *PackWriter) Add(typ string, data []byte) (OID, error) {
	id := HashObject(typ, data)
	if p.seen[id] {
		return id, nil
	}
	p.start(id, typ, len(data))
	zw := p.zw
	if typ == "tree" {
		zw = p.stored
	}
	zw.Reset(p.out)
	zw.Write(data)
	return id, p.end(zw.Close())
}

// Compressors are the zlib writers of a pack writer or of loose objects,
// kept for the next (nil: made when it starts): a compressor is about a
// megabyte to allocate, more than a small pack's whole work.
type Compressors struct{ deflate, store *zlib.Writer }

// Compressors returns p's zlib writers, for the next pack.
func (p *PackWriter) Compressors() Compressors {
	return Compressors{deflate: p.zw, store: p.stored}
}

// Len is how many objects p holds.
func (p *PackWriter) Len() int { return len(p.objs) }

// AddCompressed is Add for an object already hashed (id) and compressed
// (z, zlib of its size bytes).
func (p *PackWriter) AddCompressed(id OID, typ string, size int, z []byte) error {
	if p.seen[id] {
		return nil
	}
	p.start(id, typ, size)
	_, err := p.out.Write(z)
	return p.end(err)
}

// start begins object id's entry: its type and size.
func (p *PackWriter) start(id OID, typ string, size int) {
	p.seen[id] = true
	p.objs = append(p.objs, packedObject{id: id, off: p.out.n})
	p.out.crc.Reset()
	var head [10]byte
	head[0] = packType(typ)<<4 | byte(size&0x0f)
	n := 1
	for rest := size >> 4; rest > 0; rest >>= 7 {
		head[n-1] |= 0x80
		head[n] = byte(rest & 0x7f)
		n++
	}
	p.out.Write(head[:n])
}

// end closes the entry start began, with the error of writing it.
func (p *PackWriter) end(err error) error {
	if err != nil {
		return fmt.Errorf("snapshot store: %w: %w", ErrPackWrite, err)
	}
	p.objs[len(p.objs)-1].crc = p.out.crc.Sum32()
	return nil
}

// Finish writes the pack's count and checksum and its index, and puts
// both in place. The pack is safe to Abort afterwards.
func (p *PackWriter) Finish() error {
	err := p.out.w.Flush()
	if err == nil {
		var count [4]byte
		binary.BigEndian.PutUint32(count[:], uint32(len(p.objs)))
		_, err = p.f.WriteAt(count[:], 8)
	}
	// The checksum covers the count: the pack is read again (it is in
	// the page cache) rather than hashed as it was written.
	sum := sha1.New()
	if err == nil {
		_, err = io.Copy(sum, io.NewSectionReader(p.f, 0, p.out.n))
	}
	var packSum [20]byte
	sum.Sum(packSum[:0])
	if err == nil {
		_, err = p.f.WriteAt(packSum[:], p.out.n)
	}
	if err == nil {
		err = p.f.Sync()
	}
	if err == nil {
		err = p.f.Chmod(0o444)
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p.f.Name())
		return fmt.Errorf("snapshot store: writing a pack: %w", err)
	}
	idx, err := p.writeIndex(packSum)
	if err != nil {
		os.Remove(p.f.Name())
		return err
	}
	base := filepath.Join(p.dir, fmt.Sprintf("pack-%x", packSum))
	if err = os.Rename(p.f.Name(), base+".pack"); err == nil {
		err = os.Rename(idx, base+".idx")
	}
	if err != nil {
		os.Remove(p.f.Name())
		os.Remove(idx)
		return fmt.Errorf("snapshot store: putting a pack in place: %w", err)
	}
	if d, err := os.Open(p.dir); err == nil {
		d.Sync()
		d.Close()
	}
	p.f = nil
	return nil
}

// writeIndex writes the pack's index under a temporary name and returns it.
func (p *PackWriter) writeIndex(packSum [20]byte) (string, error) {
	f, err := os.CreateTemp(p.dir, "tmp_idx_")
	if err != nil {
		return "", fmt.Errorf("snapshot store: writing a pack index: %w", err)
	}
	objs := p.objs // sorted in place: the pack is written
	slices.SortFunc(objs, func(a, b packedObject) int { return bytes.Compare(a.id[:], b.id[:]) })
	sum := sha1.New()
	w := bufio.NewWriter(io.MultiWriter(f, sum))
	put := func(v uint32) { binary.Write(w, binary.BigEndian, v) }
	w.Write([]byte{0xff, 't', 'O', 'c'})
	put(2)
	var fan [256]uint32
	for _, o := range objs {
		fan[o.id[0]]++
	}
	total := uint32(0)
	for _, n := range fan {
		total += n
		put(total)
	}
	for _, o := range objs {
		w.Write(o.id[:])
	}
	for _, o := range objs {
		put(o.crc)
	}
	var large []int64
	for _, o := range objs {
		if o.off < 1<<31 {
			put(uint32(o.off))
		} else {
			put(1<<31 | uint32(len(large)))
			large = append(large, o.off)
		}
	}
	for _, off := range large {
		binary.Write(w, binary.BigEndian, uint64(off))
	}
	w.Write(packSum[:])
	err = w.Flush()
	if err == nil {
		_, err = f.Write(sum.Sum(nil))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("snapshot store: writing a pack index: %w", err)
	}
	return f.Name(), nil
}

// Abort removes an unfinished pack.
func (p *PackWriter) Abort() {
	if p.f != nil {
		p.f.Close()
		os.Remove(p.f.Name())
		p.f = nil
	}
}
