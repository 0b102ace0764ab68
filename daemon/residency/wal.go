package residency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/internal/atomicfile"
)

// The write-ahead log (WAL) makes a group commit durable with one fdatasync.
//
// bbolt syncs twice per commit (its pages, then the meta page that makes
// them current), and its NoSync mode is unsafe on power loss because a
// later transaction may reuse pages the last synced one still needs. So
// the store keeps one bbolt write transaction open across many batches and
// makes each batch durable by appending the batch's changes (every Put and
// Delete it made, in order) to this log and syncing it once; the bbolt
// transaction is committed, with bbolt's own syncs, at checkpoints off the
// answer path (see Store.checkpoint). bbolt records the id of the last
// record it holds; on open, records after it are replayed into bbolt.
//
// The file is preallocated with zeros and overwritten in place from the
// start after every checkpoint, so a sync writes data blocks only: no
// size or extent change for the filesystem to journal. A record is
//
//	crc32c(len‖id‖payload) uint32 | len uint32 | id uint64 | payload
//
// and ids are consecutive. Reading stops at the first record whose checksum
// fails or whose id does not follow: a torn write (never acknowledged) or
// a stale record of an earlier lap.

// WALFile is the name of the write-ahead log inside an agent's state
// directory.
const WALFile = "residency.wal"

// walSize is the preallocated size of the log. A checkpoint happens once
// half of it is used, so it also bounds what bbolt may lag behind.
const walSize = 4 << 20

const walHeader = 16

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// wal is the log file and the position of the next record. It belongs to
// whoever holds the store's commitMu.
type wal struct {
	f      *os.File
	size   int64
	off    int64  // where the next record goes
	nextID uint64 // id of the next record
}

// walRecord is one record read back on open.
type walRecord struct {
	id      uint64
	payload []byte
	off     int // where it starts in the file
}

// walFound is what readWAL found on disk, for the damage checks of
// recover (damage.go).
type walFound struct {
	path    string
	existed bool  // the file was there
	length  int64 // its length
	size    int64 // the size it is expected to have (preallocated)
	data    []byte
	recs    []walRecord // the valid, consecutive run at the start
	end     int         // where that run stops
}

// readWAL reads the log in dir without creating or changing it. It
// refuses a log that is not a regular file, never following a symbolic
// link.
func readWAL(dir string, size int64) (*walFound, error) {
	path := filepath.Join(dir, WALFile)
	found := &walFound{path: path, size: size}
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
	data, err := io.ReadAll(io.LimitReader(f, max(size, walMaxRead)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	found.existed, found.data, found.length = true, data, int64(len(data))
	found.recs, found.end = parseWALRun(data)
	return found, nil
}

// openWAL opens the log readWAL found (creating it, and preallocating it
// to its expected size when missing or shorter), for writing from the
// start.
func openWAL(found *walFound) (*wal, error) {
	f, err := os.OpenFile(found.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", found.path, err)
	}
	w := &wal{f: f, size: max(found.length, found.size)}
	if found.length < found.size {
		if err := w.preallocate(found.length, found.size); err != nil {
			f.Close()
			return nil, fmt.Errorf("preallocate %s: %w", found.path, err)
		}
	}
	return w, nil
}

// walMaxRead bounds what openWAL reads of a log larger than expected: the
// store never writes past the preallocated size, so more is not its own.
const walMaxRead = 64 << 20

// preallocate writes zeros from `from` to size and syncs the file and its
// directory, so later syncs of the log change no metadata.
func (w *wal) preallocate(from, size int64) error {
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

// parseWALRun returns the run of valid, consecutive records at the start
// of data, and the offset where the run stops.
func parseWALRun(data []byte) ([]walRecord, int) {
	var recs []walRecord
	off := 0
	for off+walHeader <= len(data) {
		r, end, ok := recordAt(data, off)
		if !ok || (len(recs) > 0 && r.id != recs[len(recs)-1].id+1) {
			break
		}
		recs = append(recs, r)
		off = end
	}
	return recs, off
}

// recordAt decodes the record at off if its length fits in data and its
// checksum holds; end is where it stops.
func recordAt(data []byte, off int) (r walRecord, end int, ok bool) {
	if off < 0 || off+walHeader > len(data) {
		return walRecord{}, 0, false
	}
	sum := binary.LittleEndian.Uint32(data[off:])
	n := int(binary.LittleEndian.Uint32(data[off+4:]))
	id := binary.LittleEndian.Uint64(data[off+8:])
	end = off + walHeader + n
	if n == 0 || end > len(data) || end < off {
		return walRecord{}, 0, false
	}
	if crc32.Checksum(data[off+4:end], crcTable) != sum {
		return walRecord{}, 0, false
	}
	return walRecord{id: id, payload: data[off+walHeader : end], off: off}, end, true
}

// recordsAfter finds, from offset from on, every valid record whose id is
// above after: records that a damaged one cut off from the run. Records of
// an earlier lap always carry lower ids (each lap starts past the last id
// bbolt holds), so what this finds was written after the run's start and
// is lost if the run is believed. Records are not aligned, so every offset
// is tried; the id and length are checked before the checksum, which keeps
// the scan of a whole log to a few milliseconds.
func recordsAfter(data []byte, from int, after uint64) []walRecord {
	var found []walRecord
	maxID := after + uint64(len(data)/(walHeader+1)) + 1
	for off := max(from, 0); off+walHeader <= len(data); off++ {
		id := binary.LittleEndian.Uint64(data[off+8:])
		if id <= after || id > maxID {
			continue
		}
		r, end, ok := recordAt(data, off)
		if !ok {
			continue
		}
		found = append(found, r)
		off = end - 1
	}
	return found
}

// errWALFull means a record does not fit in what is left of the log; the
// caller checkpoints instead.
var errWALFull = errors.New("write-ahead log full")

// fits reports whether a record of n payload bytes fits after off.
func (w *wal) fits(n int) bool {
	return w.off+walHeader+int64(n) <= w.size
}

// append writes the payload as the next record and syncs it. On error the
// record is not durable and the position is unchanged: a later record
// overwrites whatever part of it reached the disk.
func (w *wal) append(payload []byte) error {
	if !w.fits(len(payload)) {
		return errWALFull
	}
	buf := make([]byte, walHeader+len(payload))
	binary.LittleEndian.PutUint32(buf[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(buf[8:], w.nextID)
	copy(buf[walHeader:], payload)
	binary.LittleEndian.PutUint32(buf[0:], crc32.Checksum(buf[4:], crcTable))
	if _, err := w.f.WriteAt(buf, w.off); err != nil {
		return err
	}
	// fdatasync, not fsync: the file's size and blocks never change after
	// preallocation, so its data is all there is to sync.
	if err := atomicfile.SyncData(w.f); err != nil {
		return err
	}
	w.off += int64(len(buf))
	w.nextID++
	return nil
}

// restart makes the next record go to the start of the file, after a
// checkpoint made every record so far redundant. The first record of the
// new lap carries the next id, so the stale records after it (lower ids)
// end the run when the log is read.
func (w *wal) restart() { w.off = 0 }

func (w *wal) close() error { return w.f.Close() }
