package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/continuityd/continuityd/internal/atomicfile"
)

// LogFile is the name of the write-ahead log inside an agent's state
// directory.
const LogFile = "residency.wal"

// DefaultLogSize is the preallocated size of the log. The store flushes to
// bbolt once half of it is used, so it also bounds what bbolt may lag
// behind.
const DefaultLogSize = 4 << 20

// HeaderSize is the length of a record's header.
const HeaderSize = 16

// crcTable is built on first use: building it at package initialisation
// would cost every process of the binary (each agent hook) its tables.
var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// Log is the log file and the position of the next record. It belongs to
// whoever holds the store's commit lock.
type Log struct {
	f      *os.File
	size   int64
	off    int64  // where the next record goes
	nextID uint64 // id of the next record
	syncs  uint64 // records synced (tests: which appends paid a sync)
}

// Record is one record read back.
type Record struct {
	ID      uint64
	Payload []byte
	Off     int // where it starts in the file
}

// Found is what ReadLog found on disk, for CheckLog and for replay.
type Found struct {
	Path    string
	Existed bool  // the file was there
	Length  int64 // its length
	Size    int64 // the size it is expected to have (preallocated)
	Data    []byte
	Recs    []Record // the valid, consecutive run at the start
	End     int      // where that run stops
}

// ReadLog reads the log in dir without creating or changing it. It
// refuses a log that is not a regular file, never following a symbolic
// link.
func ReadLog(dir string, size int64) (*Found, error) {
	path := filepath.Join(dir, LogFile)
	found := &Found{Path: path, Size: size}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): move it away", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into a buffer of the file's size (and the little more
	// ReadFrom wants to see the end) rather than one io.ReadAll grows by
	// doubling: the preallocated 4 MiB log cost 10 MB of garbage at every
	// start.
	limit := max(size, maxRead) + 1
	buf := bytes.NewBuffer(make([]byte, 0, min(fi.Size(), limit)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	data := buf.Bytes()
	found.Existed, found.Data, found.Length = true, data, int64(len(data))
	found.Recs, found.End = ParseRun(data)
	return found, nil
}

// OpenLog opens the log ReadLog found (creating it, and preallocating it
// to its expected size when missing or shorter), for writing from the
// start. Its records carry ids from 0 until ContinueAfter says where
// the log goes on.
func OpenLog(found *Found) (*Log, error) {
	f, err := os.OpenFile(found.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", found.Path, err)
	}
	w := &Log{f: f, size: max(found.Length, found.Size)}
	if found.Length < found.Size {
		if err := w.preallocate(found.Length, found.Size); err != nil {
			f.Close()
			return nil, fmt.Errorf("preallocate %s: %w", found.Path, err)
		}
	}
	return w, nil
}

// maxRead bounds what ReadLog reads of a log larger than expected: the
// store never writes past the preallocated size, so more is not its own.
const maxRead = 64 << 20

// preallocate writes zeros from `from` to size and syncs the file and its
// directory, so later syncs of the log change no metadata.
func (w *Log) preallocate(from, size int64) error {
	zeros := make([]byte, 256<<10)
	for off := from; off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := w.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(w.f.Name()))
}

// ParseRun returns the run of valid, consecutive records at the start of
// data, and the offset where the run stops.
func ParseRun(data []byte) ([]Record, int) {
	var recs []Record
	off := 0
	for off+HeaderSize <= len(data) {
		r, end, ok := ReadRecord(data, off)
		if !ok || (len(recs) > 0 && r.ID != recs[len(recs)-1].ID+1) {
			break
		}
		recs = append(recs, r)
		off = end
	}
	return recs, off
}

// ReadRecord decodes the record at off if its length fits in data and its
// checksum holds; end is where it stops.
func ReadRecord(data []byte, off int) (r Record, end int, ok bool) {
	if off < 0 || off+HeaderSize > len(data) {
		return Record{}, 0, false
	}
	sum := binary.LittleEndian.Uint32(data[off:])
	n := int(binary.LittleEndian.Uint32(data[off+4:]))
	id := binary.LittleEndian.Uint64(data[off+8:])
	end = off + HeaderSize + n
	if n == 0 || end > len(data) || end < off {
		return Record{}, 0, false
	}
	if crc32.Checksum(data[off+4:end], crcTable()) != sum {
		return Record{}, 0, false
	}
	return Record{ID: id, Payload: data[off+HeaderSize : end], Off: off}, end, true
}

// EncodeRecord returns the record id carrying payload, header included.
func EncodeRecord(id uint64, payload []byte) []byte {
	buf := make([]byte, HeaderSize+len(payload))
	binary.LittleEndian.PutUint32(buf[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(buf[8:], id)
	copy(buf[HeaderSize:], payload)
	binary.LittleEndian.PutUint32(buf[0:], crc32.Checksum(buf[4:], crcTable()))
	return buf
}

// RecordsAfter finds, from offset from on, every valid record whose id is
// above after: records that a damaged one cut off from the run. Records of
// an earlier lap always carry lower ids (each lap starts past the last id
// bbolt holds), so what this finds was written after the run's start and
// is lost if the run is believed. Records are not aligned, so every offset
// is tried; the id and length are checked before the checksum, which keeps
// the scan of a whole log to a few milliseconds.
func RecordsAfter(data []byte, from int, after uint64) []Record {
	var found []Record
	maxID := after + uint64(len(data)/(HeaderSize+1)) + 1
	for off := max(from, 0); off+HeaderSize <= len(data); off++ {
		id := binary.LittleEndian.Uint64(data[off+8:])
		if id <= after || id > maxID {
			continue
		}
		r, end, ok := ReadRecord(data, off)
		if !ok {
			continue
		}
		found = append(found, r)
		off = end - 1
	}
	return found
}

// ErrLogFull means a record does not fit in what is left of the log; the
// caller flushes to bbolt instead.
var ErrLogFull = errors.New("write-ahead log full")

// Fits reports whether a record of n payload bytes fits after the last.
func (w *Log) Fits(n int) bool {
	return w.off+HeaderSize+int64(n) <= w.size
}

// Append writes the payload as the next record and syncs it. On error the
// record is not durable and the position is unchanged: a later record
// overwrites whatever part of it reached the disk.
func (w *Log) Append(payload []byte) error { return w.append(payload, true) }

// AppendUnsynced writes the payload as the next record without syncing
// it: the next Append's sync (the log is one file, written in order) or
// a flush to bbolt makes it durable. For records nobody was told are
// durable; a crash before either leaves a torn or stale tail, which
// reading stops at.
func (w *Log) AppendUnsynced(payload []byte) error { return w.append(payload, false) }

func (w *Log) append(payload []byte, sync bool) error {
	if !w.Fits(len(payload)) {
		return ErrLogFull
	}
	buf := EncodeRecord(w.nextID, payload)
	if _, err := w.f.WriteAt(buf, w.off); err != nil {
		return err
	}
	// fdatasync, not fsync: the file's size and blocks never change after
	// preallocation, so its data is all there is to sync.
	if sync {
		if err := atomicfile.SyncData(w.f); err != nil {
			return err
		}
		w.syncs++
	}
	w.off += int64(len(buf))
	w.nextID++
	return nil
}

// LastID is the id of the last record written (or, before any, the one
// before the first).
func (w *Log) LastID() uint64 { return w.nextID - 1 }

// HalfFull reports whether more than half of the log is used: time to
// flush to bbolt.
func (w *Log) HalfFull() bool { return w.off > w.size/2 }

// Used is how many bytes of the log this lap's records take.
func (w *Log) Used() int64 { return w.off }

// Dir is the directory holding the log.
func (w *Log) Dir() string { return filepath.Dir(w.f.Name()) }

// Restart makes the next record go to the start of the file, after a
// flush to bbolt made every record so far redundant. The first record of
// the new lap carries the next id, so the stale records after it (lower
// ids) end the run when the log is read.
func (w *Log) Restart() { w.off = 0 }

// ContinueAfter makes the next record the first of a new lap, carrying
// id last+1: last is the last record bbolt holds.
func (w *Log) ContinueAfter(last uint64) {
	w.nextID = last + 1
	w.Restart()
}

// Close closes the file.
func (w *Log) Close() error { return w.f.Close() }
