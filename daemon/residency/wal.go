package residency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/daemon/atomicfile"
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
}

// openWAL opens (creating and preallocating to size when missing or
// shorter) the log in dir and returns the records it holds, in order.
func openWAL(dir string, size int64) (*wal, []walRecord, error) {
	path := filepath.Join(dir, WALFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	w := &wal{f: f}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	recs := parseWAL(data)
	if int64(len(data)) < size {
		if err := w.preallocate(int64(len(data)), size); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("preallocate %s: %w", path, err)
		}
		w.size = size
	} else {
		w.size = int64(len(data))
	}
	return w, recs, nil
}

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

// parseWAL returns the run of valid, consecutive records at the start of
// data.
func parseWAL(data []byte) []walRecord {
	var recs []walRecord
	for off := 0; off+walHeader <= len(data); {
		sum := binary.LittleEndian.Uint32(data[off:])
		n := int(binary.LittleEndian.Uint32(data[off+4:]))
		id := binary.LittleEndian.Uint64(data[off+8:])
		end := off + walHeader + n
		if n == 0 || end > len(data) || end < off {
			break
		}
		if crc32.Checksum(data[off+4:end], crcTable) != sum {
			break
		}
		if len(recs) > 0 && id != recs[len(recs)-1].id+1 {
			break
		}
		recs = append(recs, walRecord{id: id, payload: data[off+walHeader : end]})
		off = end
	}
	return recs
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
